import {
  COMM_TARGET,
  COMM_VERSIONS,
  DEFAULT_SORT,
  ITimingRow,
  ITimingsPayload,
  LOG_PREFIX,
  MIME_TYPE,
  TimingsStore,
  cellKey,
  executionWallMs,
  filterRows,
  kernelTime,
  nextSort,
  parsePayload,
  readCommMessage,
  readDisplayHint,
  sortRows,
  summarize,
  validatePayload
} from '../model';

function row(overrides: Partial<ITimingRow> = {}): ITimingRow {
  return {
    name: 'matmul',
    device: 'cpu',
    calls: 3,
    total_ms: 4.0,
    self_ms: 3.5,
    mean_ms: 1.33,
    device_ms: null,
    share: 0.44,
    ...overrides
  };
}

/** The example of docs/timings-payload.md, plus a CUDA row. */
function payload(overrides: Partial<ITimingsPayload> = {}): ITimingsPayload {
  return {
    version: 1,
    cell_id: 'd2f4a1',
    execution_count: 7,
    wall_ms: 12.5,
    totals: { calls: 42, host_ms: 9.1, device_ms: 3.2 },
    rows: [
      row(),
      row({
        name: 'softmax_last_dim',
        device: 'cuda:0',
        calls: 2,
        total_ms: 3.0,
        self_ms: 3.0,
        mean_ms: 1.5,
        device_ms: 3.2,
        share: 0.33
      }),
      row({
        name: 'add',
        calls: 37,
        total_ms: 2.6,
        self_ms: 2.6,
        mean_ms: 0.07,
        share: 0.29
      })
    ],
    ...overrides
  };
}

/** A deep copy as plain JSON, so tests can break it freely. */
function json(value: unknown): any {
  return JSON.parse(JSON.stringify(value));
}

describe('constants', () => {
  it('match the payload contract', () => {
    expect(MIME_TYPE).toBe('application/vnd.workbench.timings+json');
    expect(COMM_TARGET).toBe('workbench.timings');
  });
});

describe('validatePayload', () => {
  it('accepts the documented version 1 payload', () => {
    const result = validatePayload(json(payload()));
    expect(result).toEqual({ ok: true, payload: payload() });
  });

  it('accepts null cell_id, execution_count and device times', () => {
    const data = json(payload({ cell_id: null, execution_count: null }));
    data.totals.device_ms = null;
    data.rows[1].device_ms = null;
    const result = validatePayload(data);
    expect(result.ok).toBe(true);
  });

  it('accepts a cell with no ops', () => {
    const data = json(
      payload({ rows: [], totals: { calls: 0, host_ms: 0, device_ms: null } })
    );
    expect(validatePayload(data).ok).toBe(true);
  });

  it('keeps only the fields of the contract', () => {
    const data = json(payload());
    data.extra = 'x';
    data.rows[0].shapes = [[2, 3]];
    const result = validatePayload(data);
    expect(result.ok && 'extra' in result.payload).toBe(false);
    expect(result.ok && 'shapes' in result.payload.rows[0]).toBe(false);
  });

  it.each([
    [2, 'unsupported version 2'],
    [0, 'unsupported version 0'],
    ['1', 'unsupported version "1"'],
    [null, 'unsupported version null']
  ])('rejects version %p', (version, message) => {
    const data = json(payload());
    data.version = version;
    const result = validatePayload(data);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toContain(message);
    expect(!result.ok && result.error).toContain('reads version 1');
  });

  it('rejects a payload without version', () => {
    const data = json(payload());
    delete data.version;
    expect(validatePayload(data)).toEqual({
      ok: false,
      error: "missing field 'version'"
    });
  });

  it.each(['cell_id', 'execution_count', 'wall_ms', 'totals', 'rows'])(
    'rejects a payload without %s',
    key => {
      const data = json(payload());
      delete data[key];
      expect(validatePayload(data)).toEqual({
        ok: false,
        error: `missing field '${key}'`
      });
    }
  );

  it.each(['calls', 'host_ms', 'device_ms'])(
    'rejects totals without %s',
    key => {
      const data = json(payload());
      delete data.totals[key];
      expect(validatePayload(data)).toEqual({
        ok: false,
        error: `missing field 'totals.${key}'`
      });
    }
  );

  it.each([
    'name',
    'device',
    'calls',
    'total_ms',
    'self_ms',
    'mean_ms',
    'device_ms',
    'share'
  ])('rejects a row without %s and names the row', key => {
    const data = json(payload());
    delete data.rows[2][key];
    expect(validatePayload(data)).toEqual({
      ok: false,
      error: `missing field 'rows[2].${key}'`
    });
  });

  it.each<[string, (data: any) => void, string]>([
    [
      'negative time',
      d => (d.wall_ms = -1),
      "'wall_ms' must be a non-negative"
    ],
    ['string time', d => (d.rows[0].total_ms = '4'), "'rows[0].total_ms'"],
    [
      'fractional calls',
      d => (d.rows[1].calls = 1.5),
      "'rows[1].calls' must be a non-negative integer"
    ],
    ['negative count', d => (d.totals.calls = -3), "'totals.calls'"],
    [
      'empty op name',
      d => (d.rows[0].name = ''),
      "'rows[0].name' must be a non-empty string"
    ],
    ['numeric device', d => (d.rows[0].device = 0), "'rows[0].device'"],
    [
      'empty cell id',
      d => (d.cell_id = ''),
      "'cell_id' must be a non-empty string or null"
    ],
    ['rows not a list', d => (d.rows = {}), "'rows' must be an array"],
    ['row not an object', d => (d.rows[1] = 5), "'rows[1]' must be an object"],
    [
      'totals not an object',
      d => (d.totals = [1]),
      "'totals' must be an object"
    ],
    [
      'fractional execution count',
      d => (d.execution_count = 1.5),
      "'execution_count'"
    ]
  ])('rejects %s', (_, breakIt, message) => {
    const data = json(payload());
    breakIt(data);
    const result = validatePayload(data);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toContain(message);
  });

  it('rejects non-finite numbers (NaN/Infinity never reach JSON, but may reach JS)', () => {
    const data = json(payload());
    data.rows[0].mean_ms = NaN;
    expect(validatePayload(data).ok).toBe(false);
    data.rows[0].mean_ms = Infinity;
    expect(validatePayload(data).ok).toBe(false);
  });

  it.each([null, undefined, 42, 'text', [], [payload()], true])(
    'rejects %p without throwing',
    value => {
      const result = validatePayload(value);
      expect(result.ok).toBe(false);
      expect(!result.ok && result.error).toMatch(/expected a JSON object/);
    }
  );

  it('never throws, even on hostile objects', () => {
    const data = json(payload());
    Object.defineProperty(data, 'rows', {
      enumerable: true,
      get() {
        throw new Error('boom');
      }
    });
    const result = validatePayload(data);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toContain('boom');
  });
});

describe('parsePayload', () => {
  it('returns a valid payload without warning', () => {
    const warn = jest.fn();
    expect(parsePayload(json(payload()), 'test', warn)).toEqual(payload());
    expect(warn).not.toHaveBeenCalled();
  });

  it('warns once, clearly, and returns null for a bad payload', () => {
    const warn = jest.fn();
    const data = json(payload());
    data.version = 3;
    expect(parsePayload(data, 'cell abc', warn)).toBeNull();
    expect(warn).toHaveBeenCalledTimes(1);
    const message: string = warn.mock.calls[0][0];
    expect(message.startsWith(LOG_PREFIX)).toBe(true);
    expect(message).toContain('cell abc');
    expect(message).toContain('unsupported version 3');
  });

  it('warns on the console by default', () => {
    const spy = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      expect(parsePayload({ version: 1 }, 'a test')).toBeNull();
      expect(spy).toHaveBeenCalledWith(
        expect.stringContaining("missing field 'cell_id'")
      );
    } finally {
      spy.mockRestore();
    }
  });
});

describe('cellKey', () => {
  it('prefers the cell holding the output', () => {
    expect(cellKey(payload(), 'outer')).toBe('outer');
  });

  it("falls back to the payload's cell id, then its execution count", () => {
    expect(cellKey(payload())).toBe('d2f4a1');
    expect(cellKey(payload({ cell_id: null }))).toBe('execution:7');
    expect(
      cellKey(payload({ cell_id: null, execution_count: null }))
    ).toBeNull();
  });
});

describe('TimingsStore', () => {
  it('stores one entry per cell and replaces re-runs', () => {
    const store = new TimingsStore();
    const changed = jest.fn();
    store.changed.connect(changed);
    expect(store.add(payload(), 'output', 'a')).toBe('a');
    expect(store.add(payload({ wall_ms: 20 }), 'comm', 'a')).toBe('a');
    expect(store.size).toBe(1);
    expect(store.get('a')?.payload.wall_ms).toBe(20);
    expect(store.get('a')?.source).toBe('comm');
    expect(changed).toHaveBeenCalledTimes(2);
  });

  it('ignores the same payload again (a rescan of unchanged outputs)', () => {
    const store = new TimingsStore();
    store.add(payload(), 'output', 'a');
    store.add(payload({ execution_count: 8 }), 'output', 'b');
    const changed = jest.fn();
    store.changed.connect(changed);
    store.add(payload(), 'output', 'a');
    expect(changed).not.toHaveBeenCalled();
    expect(store.last?.key).toBe('b');
  });

  it('knows the last cell to arrive', () => {
    const store = new TimingsStore();
    expect(store.last).toBeNull();
    store.add(payload(), 'output', 'a');
    store.add(payload({ execution_count: 8 }), 'output', 'b');
    expect(store.last?.key).toBe('b');
    store.add(payload({ execution_count: 9 }), 'comm', 'a');
    expect(store.last?.key).toBe('a');
  });

  it('keys payloads without a cell by cell_id, execution count, or a fresh key', () => {
    const store = new TimingsStore();
    expect(store.add(payload(), 'comm')).toBe('d2f4a1');
    expect(store.add(payload({ cell_id: null }), 'comm')).toBe('execution:7');
    const anonymous = payload({ cell_id: null, execution_count: null });
    const k1 = store.add(anonymous, 'comm');
    const k2 = store.add({ ...anonymous, wall_ms: 1 }, 'comm');
    expect(k1).toMatch(/^unknown:/);
    expect(k2).not.toBe(k1);
    expect(store.size).toBe(4);
  });

  it('orders cells by notebook position, unplaced ones last by arrival', () => {
    const store = new TimingsStore();
    for (const key of ['c', 'x', 'a', 'y', 'b']) {
      store.add(payload({ cell_id: key }), 'output');
    }
    const position: Record<string, number> = { a: 0, b: 1, c: 2 };
    expect(store.cells(k => position[k] ?? -1).map(c => c.key)).toEqual([
      'a',
      'b',
      'c',
      'x',
      'y'
    ]);
    expect(store.cells().map(c => c.key)).toEqual(['c', 'x', 'a', 'y', 'b']);
  });

  it('lists the devices seen', () => {
    const store = new TimingsStore();
    expect(store.devices()).toEqual([]);
    store.add(payload(), 'output', 'a');
    store.add(payload({ rows: [row({ device: 'metal' })] }), 'output', 'b');
    expect(store.devices()).toEqual(['cpu', 'cuda:0', 'metal']);
  });

  it('deletes and clears, signalling only real changes', () => {
    const store = new TimingsStore();
    const changed = jest.fn();
    store.add(payload(), 'output', 'a');
    store.add(payload(), 'output', 'b');
    store.changed.connect(changed);
    expect(store.delete('zzz')).toBe(false);
    expect(store.delete('a')).toBe(true);
    expect(store.has('a')).toBe(false);
    store.clear();
    store.clear();
    expect(store.size).toBe(0);
    expect(store.last).toBeNull();
    expect(changed).toHaveBeenCalledTimes(2);
  });
});

describe('sorting', () => {
  const rows = payload().rows;
  const names = (sorted: ITimingRow[]) => sorted.map(r => r.name);

  it('defaults to total time, most expensive first', () => {
    expect(DEFAULT_SORT).toEqual({ key: 'total_ms', descending: true });
    expect(names(sortRows(rows, DEFAULT_SORT))).toEqual([
      'matmul',
      'softmax_last_dim',
      'add'
    ]);
  });

  it('sorts by every column in both directions', () => {
    expect(names(sortRows(rows, { key: 'calls', descending: true }))).toEqual([
      'add',
      'matmul',
      'softmax_last_dim'
    ]);
    expect(names(sortRows(rows, { key: 'calls', descending: false }))).toEqual([
      'softmax_last_dim',
      'matmul',
      'add'
    ]);
    expect(names(sortRows(rows, { key: 'name', descending: false }))).toEqual([
      'add',
      'matmul',
      'softmax_last_dim'
    ]);
    expect(names(sortRows(rows, { key: 'mean_ms', descending: true }))).toEqual(
      ['softmax_last_dim', 'matmul', 'add']
    );
    expect(names(sortRows(rows, { key: 'share', descending: false }))).toEqual([
      'add',
      'softmax_last_dim',
      'matmul'
    ]);
    expect(names(sortRows(rows, { key: 'self_ms', descending: true }))).toEqual(
      ['matmul', 'softmax_last_dim', 'add']
    );
    expect(names(sortRows(rows, { key: 'device', descending: true }))).toEqual([
      'softmax_last_dim',
      'matmul',
      'add'
    ]);
  });

  it('puts missing device times last in both directions', () => {
    for (const descending of [true, false]) {
      expect(names(sortRows(rows, { key: 'device_ms', descending }))).toEqual([
        'softmax_last_dim',
        'matmul',
        'add'
      ]);
    }
  });

  it('keeps the payload order for ties and never mutates its input', () => {
    const tied = [row({ name: 'b' }), row({ name: 'a' }), row({ name: 'c' })];
    const before = json(tied);
    expect(names(sortRows(tied, { key: 'calls', descending: true }))).toEqual([
      'b',
      'a',
      'c'
    ]);
    expect(tied).toEqual(before);
  });

  it('flips a column on a second click; new columns start sensibly', () => {
    expect(nextSort(DEFAULT_SORT, 'total_ms')).toEqual({
      key: 'total_ms',
      descending: false
    });
    expect(nextSort(DEFAULT_SORT, 'calls')).toEqual({
      key: 'calls',
      descending: true
    });
    expect(nextSort(DEFAULT_SORT, 'name')).toEqual({
      key: 'name',
      descending: false
    });
    expect(nextSort({ key: 'name', descending: false }, 'name')).toEqual({
      key: 'name',
      descending: true
    });
  });
});

describe('filterRows and summarize', () => {
  it('filters by device; null keeps all', () => {
    const rows = payload().rows;
    expect(filterRows(rows, null)).toHaveLength(3);
    expect(filterRows(rows, 'cuda:0').map(r => r.name)).toEqual([
      'softmax_last_dim'
    ]);
    expect(filterRows(rows, 'metal')).toEqual([]);
  });

  it("uses the payload's totals over all devices", () => {
    expect(summarize(payload())).toEqual({
      ops: 3,
      calls: 42,
      hostMs: 9.1,
      deviceMs: 3.2,
      kernelWallMs: 12.5
    });
  });

  it("sums one device's rows by self time", () => {
    const cpu = summarize(payload(), 'cpu');
    expect(cpu.ops).toBe(2);
    expect(cpu.calls).toBe(40);
    expect(cpu.hostMs).toBeCloseTo(6.1);
    expect(cpu.deviceMs).toBeNull();
    expect(cpu.kernelWallMs).toBe(12.5);
    const cuda = summarize(payload(), 'cuda:0');
    expect(cuda.deviceMs).toBeCloseTo(3.2);
    expect(summarize(payload(), 'metal')).toMatchObject({
      ops: 0,
      calls: 0,
      hostMs: 0
    });
  });

  it('reports device time when measured, host op time otherwise', () => {
    expect(kernelTime(payload())).toEqual({ ms: 3.2, onDevice: true });
    const cpuOnly = payload({
      totals: { calls: 4, host_ms: 2, device_ms: null }
    });
    expect(kernelTime(cpuOnly)).toEqual({ ms: 2, onDevice: false });
  });
});

describe('executionWallMs', () => {
  const execution = {
    'iopub.status.busy': '2024-05-01T10:00:00.000Z',
    'iopub.execute_input': '2024-05-01T10:00:00.010Z',
    'shell.execute_started': '2024-05-01T10:00:00.011Z',
    'shell.execute_reply': '2024-05-01T10:00:01.260Z',
    'iopub.status.idle': '2024-05-01T10:00:01.270Z'
  };

  it('measures execute_input to execute_reply', () => {
    expect(executionWallMs({ execution })).toBe(1250);
  });

  it('falls back to the busy status when execute_input is missing', () => {
    const { ['iopub.execute_input']: _, ...rest } = execution;
    expect(executionWallMs({ execution: rest })).toBe(1260);
  });

  it('reads microsecond timestamps', () => {
    expect(
      executionWallMs({
        execution: {
          'iopub.execute_input': '2024-05-01T10:00:00.123456Z',
          'shell.execute_reply': '2024-05-01T10:00:00.223456Z'
        }
      })
    ).toBeCloseTo(100, 0);
  });

  it.each([
    undefined,
    null,
    {},
    { execution: null },
    { execution: 'x' },
    { execution: { 'shell.execute_reply': execution['shell.execute_reply'] } },
    {
      execution: {
        'iopub.execute_input': 'not a date',
        'shell.execute_reply': 'x'
      }
    },
    {
      execution: {
        'iopub.execute_input': execution['shell.execute_reply'],
        'shell.execute_reply': execution['iopub.execute_input']
      }
    }
  ])('returns null for unusable metadata %p', metadata => {
    expect(executionWallMs(metadata)).toBeNull();
  });
});

describe('readCommMessage', () => {
  it('reads timings messages', () => {
    expect(
      readCommMessage({ type: 'timings', payload: json(payload()) })
    ).toEqual({
      kind: 'timings',
      payload: payload()
    });
  });

  it('reads the ready handshake, its protocol version and auto mode', () => {
    expect(COMM_VERSIONS).toEqual([2]);
    expect(readCommMessage({ type: 'ready', version: 2, auto: true })).toEqual({
      kind: 'ready',
      version: 2,
      auto: true
    });
    for (const version of [1, 3]) {
      const other = readCommMessage({ type: 'ready', version, auto: false });
      expect(other.kind).toBe('ignored');
      expect(other.kind === 'ignored' && other.reason).toContain(
        `comm protocol version ${version}`
      );
    }
    const noAuto = readCommMessage({ type: 'ready', version: 2 });
    expect(noAuto.kind === 'ignored' && noAuto.reason).toContain(
      "needs 'auto' true or false, got nothing"
    );
  });

  it('reads state messages', () => {
    expect(readCommMessage({ type: 'state', auto: false })).toEqual({
      kind: 'state',
      auto: false
    });
    const bad = readCommMessage({ type: 'state', auto: 1 });
    expect(bad.kind === 'ignored' && bad.reason).toContain(
      "a 'state' message needs 'auto' true or false, got 1"
    );
  });

  it('ignores bad payloads, unknown types and non-objects with a reason', () => {
    const bad = readCommMessage({ type: 'timings', payload: { version: 9 } });
    expect(bad.kind === 'ignored' && bad.reason).toContain(
      'unsupported version 9'
    );
    const unknown = readCommMessage({ type: 'bye' });
    expect(unknown.kind === 'ignored' && unknown.reason).toContain('"bye"');
    expect(readCommMessage('timings').kind).toBe('ignored');
    expect(readCommMessage(null).kind).toBe('ignored');
  });
});

describe('readDisplayHint', () => {
  it('reads rows and sort', () => {
    expect(
      readDisplayHint({ rows: 3, sort: { key: 'calls', descending: true } })
    ).toEqual({ rows: 3, sort: { key: 'calls', descending: true } });
    expect(readDisplayHint({ rows: 0 }).rows).toBe(0);
  });

  it.each([
    undefined,
    null,
    'rows',
    { rows: -1 },
    { rows: 2.5 },
    { rows: '3' },
    { sort: { key: 'nope', descending: true } },
    { sort: { key: 'calls' } }
  ])('falls back to every row in payload order for %p', metadata => {
    const hint = readDisplayHint(metadata);
    expect(hint.sort).toEqual(DEFAULT_SORT);
    if (!(metadata && typeof metadata === 'object' && 'sort' in metadata)) {
      expect(hint.rows).toBeNull();
    }
  });
});

describe('TimingsStore staleness', () => {
  it('marks every cell stale until it arrives again', () => {
    const store = new TimingsStore();
    const changes: number[] = [];
    store.changed.connect(() => changes.push(store.size));
    store.add(payload(), 'comm', 'a');
    store.add(payload(), 'output', 'b');
    expect(store.get('a')!.stale).toBe(false);
    store.markStale();
    expect([store.get('a')!.stale, store.get('b')!.stale]).toEqual([
      true,
      true
    ]);
    expect(changes).toHaveLength(3);
    store.markStale(); // nothing new: no change signal
    expect(changes).toHaveLength(3);
    // The same numbers rescanned from a saved output stay stale...
    store.add(payload(), 'output', 'b');
    expect(store.get('b')!.stale).toBe(true);
    // ...new numbers for the cell are fresh.
    store.add({ ...payload(), wall_ms: 99 }, 'comm', 'a');
    expect(store.get('a')!.stale).toBe(false);
    expect(store.last!.key).toBe('a');
  });
});
