/**
 * The timings model: payload validation, the per-notebook store of cell
 * timings, sorting, device filtering and totals.
 *
 * Pure by design (no DOM, no JupyterLab services) so that jest can test it
 * thoroughly; the payload contract lives in docs/timings-payload.md.
 */
import { ISignal, Signal } from '@lumino/signaling';

/** MIME type of the display output emitted by `%%wb_profile`. */
export const MIME_TYPE = 'application/vnd.workbench.timings+json';

/** Comm target of auto mode (`%wb_profile auto on`). */
export const COMM_TARGET = 'workbench.timings';

/** Payload versions this extension reads. */
export const SUPPORTED_VERSIONS: ReadonlyArray<number> = [1];

/**
 * Versions of the comm protocol (hello, ready, state, timings messages) this
 * extension speaks; version 2 added the kernel's auto-mode state.
 */
export const COMM_VERSIONS: ReadonlyArray<number> = [2];

/** Prefix of every console message of this extension. */
export const LOG_PREFIX = '[jupyterlab-workbench]';

/** One (op name, device) row of a cell's timings. */
export interface ITimingRow {
  name: string;
  device: string;
  calls: number;
  total_ms: number;
  self_ms: number;
  mean_ms: number;
  /** Null when the backend cannot time on the device. */
  device_ms: number | null;
  /** `self_ms / totals.host_ms`. */
  share: number;
}

/** Totals of a cell over all its ops. */
export interface ITimingTotals {
  calls: number;
  host_ms: number;
  device_ms: number | null;
}

/** Version 1 of the timings payload. */
export interface ITimingsPayload {
  version: number;
  cell_id: string | null;
  execution_count: number | null;
  wall_ms: number;
  totals: ITimingTotals;
  rows: ITimingRow[];
}

/** The outcome of validating a payload. */
export type ValidationResult =
  { ok: true; payload: ITimingsPayload } | { ok: false; error: string };

type Json = { [key: string]: unknown };

class PayloadError extends Error {}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function show(value: unknown): string {
  if (value === undefined) {
    return 'nothing';
  }
  try {
    const text = JSON.stringify(value);
    return text.length > 40 ? `${text.slice(0, 37)}...` : text;
  } catch {
    return String(value);
  }
}

function field(obj: Json, key: string, where: string): unknown {
  if (!(key in obj)) {
    throw new PayloadError(`missing field '${where}${key}'`);
  }
  return obj[key];
}

function milliseconds(obj: Json, key: string, where: string): number {
  const value = field(obj, key, where);
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new PayloadError(
      `'${where}${key}' must be a non-negative number of milliseconds, got ${show(value)}`
    );
  }
  return value;
}

function optionalMilliseconds(
  obj: Json,
  key: string,
  where: string
): number | null {
  return field(obj, key, where) === null ? null : milliseconds(obj, key, where);
}

function count(obj: Json, key: string, where: string): number {
  const value = field(obj, key, where);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new PayloadError(
      `'${where}${key}' must be a non-negative integer, got ${show(value)}`
    );
  }
  return value;
}

function text(obj: Json, key: string, where: string): string {
  const value = field(obj, key, where);
  if (typeof value !== 'string' || value === '') {
    throw new PayloadError(
      `'${where}${key}' must be a non-empty string, got ${show(value)}`
    );
  }
  return value;
}

function readRow(value: unknown, index: number): ITimingRow {
  const where = `rows[${index}].`;
  if (!isObject(value)) {
    throw new PayloadError(`'rows[${index}]' must be an object`);
  }
  return {
    name: text(value, 'name', where),
    device: text(value, 'device', where),
    calls: count(value, 'calls', where),
    total_ms: milliseconds(value, 'total_ms', where),
    self_ms: milliseconds(value, 'self_ms', where),
    mean_ms: milliseconds(value, 'mean_ms', where),
    device_ms: optionalMilliseconds(value, 'device_ms', where),
    share: milliseconds(value, 'share', where)
  };
}

function readV1(data: Json): ITimingsPayload {
  const cellId = field(data, 'cell_id', '');
  if (cellId !== null && (typeof cellId !== 'string' || cellId === '')) {
    throw new PayloadError(
      `'cell_id' must be a non-empty string or null, got ${show(cellId)}`
    );
  }
  const executionCount =
    field(data, 'execution_count', '') === null
      ? null
      : count(data, 'execution_count', '');
  const totals = field(data, 'totals', '');
  if (!isObject(totals)) {
    throw new PayloadError(`'totals' must be an object, got ${show(totals)}`);
  }
  const rows = field(data, 'rows', '');
  if (!Array.isArray(rows)) {
    throw new PayloadError(`'rows' must be an array, got ${show(rows)}`);
  }
  return {
    version: 1,
    cell_id: cellId as string | null,
    execution_count: executionCount,
    wall_ms: milliseconds(data, 'wall_ms', ''),
    totals: {
      calls: count(totals, 'calls', 'totals.'),
      host_ms: milliseconds(totals, 'host_ms', 'totals.'),
      device_ms: optionalMilliseconds(totals, 'device_ms', 'totals.')
    },
    rows: rows.map(readRow)
  };
}

/**
 * Check a payload against the contract of its version.
 *
 * Never throws: a bad payload gives `{ok: false, error}` with a message that
 * names the offending field. The returned payload holds only known fields.
 */
export function validatePayload(data: unknown): ValidationResult {
  if (!isObject(data)) {
    return { ok: false, error: `expected a JSON object, got ${show(data)}` };
  }
  if (!('version' in data)) {
    return { ok: false, error: "missing field 'version'" };
  }
  if (!SUPPORTED_VERSIONS.includes(data.version as number)) {
    return {
      ok: false,
      error:
        `unsupported version ${show(data.version)} (this extension reads ` +
        `version ${SUPPORTED_VERSIONS.join(', ')}); update jupyterlab-workbench ` +
        'and workbench together so both sides speak the same version'
    };
  }
  try {
    return { ok: true, payload: readV1(data) };
  } catch (error) {
    if (error instanceof PayloadError) {
      return { ok: false, error: error.message };
    }
    return { ok: false, error: `unreadable payload (${String(error)})` };
  }
}

/**
 * Validate a payload, warning on the console when it is rejected.
 *
 * @param source - where the payload came from, for the warning.
 * @returns the payload, or null when it was rejected.
 */
export function parsePayload(
  data: unknown,
  source: string,
  warn: (message: string) => void = console.warn
): ITimingsPayload | null {
  const result = validatePayload(data);
  if (result.ok) {
    return result.payload;
  }
  warn(
    `${LOG_PREFIX} ignored a timings payload from ${source}: ${result.error}`
  );
  return null;
}

/** Where a cell's timings came from. */
export type TimingsSource = 'output' | 'comm';

/** The timings of one executed cell. */
export interface ICellTimings {
  /** The notebook cell id, or a synthetic key when the kernel did not know it. */
  readonly key: string;
  readonly payload: ITimingsPayload;
  readonly source: TimingsSource;
  /** Arrival order within the store: the highest is the last cell run. */
  readonly seq: number;
  /** From a kernel that has restarted (or been replaced) since. */
  readonly stale: boolean;
}

/**
 * The key a payload is stored under.
 *
 * The id of the cell holding the output wins (it is always right for a saved
 * notebook); then the payload's own `cell_id`; then the execution count.
 */
export function cellKey(
  payload: ITimingsPayload,
  containingCellId?: string | null
): string | null {
  if (containingCellId) {
    return containingCellId;
  }
  if (payload.cell_id) {
    return payload.cell_id;
  }
  if (payload.execution_count !== null) {
    return `execution:${payload.execution_count}`;
  }
  return null;
}

/** The cell timings of one notebook, keyed by cell id. */
export class TimingsStore {
  /** Emits after every change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Number of cells with timings. */
  get size(): number {
    return this._cells.size;
  }

  /** The cell whose timings arrived last, or null. */
  get last(): ICellTimings | null {
    let last: ICellTimings | null = null;
    for (const cell of this._cells.values()) {
      if (last === null || cell.seq > last.seq) {
        last = cell;
      }
    }
    return last;
  }

  /**
   * Store a payload, replacing any earlier timings of the same cell.
   *
   * @returns the key used, see `cellKey`.
   */
  add(
    payload: ITimingsPayload,
    source: TimingsSource,
    containingCellId?: string | null
  ): string {
    const key =
      cellKey(payload, containingCellId) ?? `unknown:${this._seq + 1}`;
    const previous = this._cells.get(key);
    if (previous && samePayload(previous.payload, payload)) {
      // Rescanning unchanged outputs must not make an old cell the "last" one
      // (nor a stale one fresh: the same numbers are still the old kernel's).
      return key;
    }
    this._cells.set(key, {
      key,
      payload,
      source,
      seq: ++this._seq,
      stale: false
    });
    this._changed.emit();
    return key;
  }

  /**
   * Mark every cell as coming from a previous kernel (after a restart): they
   * stay, flagged, until their cell runs again.
   */
  markStale(): void {
    let changed = false;
    for (const [key, cell] of this._cells) {
      if (!cell.stale) {
        this._cells.set(key, { ...cell, stale: true });
        changed = true;
      }
    }
    if (changed) {
      this._changed.emit();
    }
  }

  get(key: string): ICellTimings | undefined {
    return this._cells.get(key);
  }

  has(key: string): boolean {
    return this._cells.has(key);
  }

  delete(key: string): boolean {
    const deleted = this._cells.delete(key);
    if (deleted) {
      this._changed.emit();
    }
    return deleted;
  }

  clear(): void {
    if (this._cells.size > 0) {
      this._cells.clear();
      this._changed.emit();
    }
  }

  /**
   * The cells in notebook order.
   *
   * @param position - a cell's index in the notebook, or -1 when it is not
   *   there; unplaced cells come last, in arrival order.
   */
  cells(position: (key: string) => number = () => -1): ICellTimings[] {
    const placed = [...this._cells.values()].map(cell => ({
      cell,
      index: position(cell.key)
    }));
    placed.sort((a, b) => {
      const ia = a.index < 0 ? Infinity : a.index;
      const ib = b.index < 0 ? Infinity : b.index;
      return ia === ib ? a.cell.seq - b.cell.seq : ia - ib;
    });
    return placed.map(p => p.cell);
  }

  /** The devices seen in any cell, sorted. */
  devices(): string[] {
    const devices = new Set<string>();
    for (const cell of this._cells.values()) {
      for (const row of cell.payload.rows) {
        devices.add(row.device);
      }
    }
    return [...devices].sort();
  }

  private _cells = new Map<string, ICellTimings>();
  private _seq = 0;
  private _changed = new Signal<this, void>(this);
}

function samePayload(a: ITimingsPayload, b: ITimingsPayload): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** How an output's inline view starts: `%%wb_profile -n ROWS --sort KEY`. */
export interface IDisplayHint {
  /** Rows shown before "show all"; null shows every row. */
  rows: number | null;
  sort: ISortState;
}

const SORT_KEYS: ReadonlyArray<SortKey> = [
  'name',
  'device',
  'calls',
  'total_ms',
  'mean_ms',
  'self_ms',
  'device_ms',
  'share'
];

/**
 * Read the display metadata `%%wb_profile` puts beside its payload,
 * `{"rows": 3, "sort": {"key": "calls", "descending": true}}`. Anything
 * missing or malformed falls back to every row in the payload's order.
 */
export function readDisplayHint(metadata: unknown): IDisplayHint {
  const hint: IDisplayHint = { rows: null, sort: DEFAULT_SORT };
  if (!isObject(metadata)) {
    return hint;
  }
  const rows = metadata.rows;
  if (typeof rows === 'number' && Number.isInteger(rows) && rows >= 0) {
    hint.rows = rows;
  }
  const sort = metadata.sort;
  if (
    isObject(sort) &&
    SORT_KEYS.includes(sort.key as SortKey) &&
    typeof sort.descending === 'boolean'
  ) {
    hint.sort = { key: sort.key as SortKey, descending: sort.descending };
  }
  return hint;
}

/** Columns a table can be sorted by. */
export type SortKey =
  | 'name'
  | 'device'
  | 'calls'
  | 'total_ms'
  | 'mean_ms'
  | 'self_ms'
  | 'device_ms'
  | 'share';

export interface ISortState {
  key: SortKey;
  descending: boolean;
}

/** The payload's own order: most expensive first. */
export const DEFAULT_SORT: ISortState = { key: 'total_ms', descending: true };

const TEXT_KEYS: ReadonlyArray<SortKey> = ['name', 'device'];

/**
 * The sort after clicking a column header: the same column flips direction;
 * a new column starts descending for numbers and ascending for text.
 */
export function nextSort(current: ISortState, key: SortKey): ISortState {
  if (current.key === key) {
    return { key, descending: !current.descending };
  }
  return { key, descending: !TEXT_KEYS.includes(key) };
}

/**
 * Rows sorted by one column (a new array; the input is untouched).
 *
 * Missing device times sort last in either direction; ties keep the
 * payload's order, which is by total time.
 */
export function sortRows(
  rows: ReadonlyArray<ITimingRow>,
  sort: ISortState
): ITimingRow[] {
  const sign = sort.descending ? -1 : 1;
  return rows
    .map((row, index) => ({ row, index }))
    .sort((a, b) => {
      const va = a.row[sort.key];
      const vb = b.row[sort.key];
      if (va === null || vb === null) {
        if (va === vb) {
          return a.index - b.index;
        }
        return va === null ? 1 : -1;
      }
      const order =
        typeof va === 'string'
          ? va.localeCompare(vb as string)
          : (va as number) - (vb as number);
      return order !== 0 ? sign * order : a.index - b.index;
    })
    .map(entry => entry.row);
}

/** Rows of one device; `null` means all devices. */
export function filterRows(
  rows: ReadonlyArray<ITimingRow>,
  device: string | null
): ITimingRow[] {
  return device === null
    ? [...rows]
    : rows.filter(row => row.device === device);
}

/** Totals of a cell, over all devices or one. */
export interface ICellSummary {
  /** Distinct (op, device) rows. */
  ops: number;
  calls: number;
  /** Host time spent in ops (sum of self times). */
  hostMs: number;
  /** Device time, null when no op was timed on a device. */
  deviceMs: number | null;
  /** The kernel's own wall time of the whole cell. */
  kernelWallMs: number;
}

/**
 * Summarize a cell. Over all devices this is the payload's totals; for one
 * device it sums that device's rows (self times, so nested ops count once).
 */
export function summarize(
  payload: ITimingsPayload,
  device: string | null = null
): ICellSummary {
  if (device === null) {
    return {
      ops: payload.rows.length,
      calls: payload.totals.calls,
      hostMs: payload.totals.host_ms,
      deviceMs: payload.totals.device_ms,
      kernelWallMs: payload.wall_ms
    };
  }
  const rows = filterRows(payload.rows, device);
  const timed = rows.filter(row => row.device_ms !== null);
  return {
    ops: rows.length,
    calls: rows.reduce((sum, row) => sum + row.calls, 0),
    hostMs: rows.reduce((sum, row) => sum + row.self_ms, 0),
    deviceMs:
      timed.length === 0
        ? null
        : timed.reduce((sum, row) => sum + (row.device_ms as number), 0),
    kernelWallMs: payload.wall_ms
  };
}

/**
 * The time the kernel spent on a cell, the way the status bar shows it:
 * device time where the backend measured it, host op time otherwise.
 */
export function kernelTime(payload: ITimingsPayload): {
  ms: number;
  onDevice: boolean;
} {
  const device = payload.totals.device_ms;
  return device === null
    ? { ms: payload.totals.host_ms, onDevice: false }
    : { ms: device, onDevice: true };
}

/**
 * Wall time of a cell from JupyterLab's execution metadata (recorded when the
 * notebook setting `recordTiming` is on): from `iopub.execute_input` (or
 * `iopub.status.busy`) to `shell.execute_reply`.
 *
 * @returns milliseconds, or null when the timestamps are missing or unusable.
 */
export function executionWallMs(metadata: unknown): number | null {
  if (!isObject(metadata) || !isObject(metadata.execution)) {
    return null;
  }
  const execution = metadata.execution;
  const start =
    execution['iopub.execute_input'] ?? execution['iopub.status.busy'];
  const end = execution['shell.execute_reply'];
  if (typeof start !== 'string' || typeof end !== 'string') {
    return null;
  }
  const ms = Date.parse(end) - Date.parse(start);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** Connection state of auto mode for one notebook. */
export type AutoState =
  'no-kernel' | 'connecting' | 'connected' | 'unavailable';

/** A message received on the `workbench.timings` comm, once read. */
export type CommMessage =
  | { kind: 'timings'; payload: ITimingsPayload }
  | { kind: 'ready'; version: number; auto: boolean }
  | { kind: 'state'; auto: boolean }
  | { kind: 'ignored'; reason: string };

function readAuto(data: Json, type: string): boolean {
  if (typeof data.auto !== 'boolean') {
    throw new PayloadError(
      `a '${type}' message needs 'auto' true or false, got ${show(data.auto)}`
    );
  }
  return data.auto;
}

/**
 * Read a comm message (protocol version 2): `{"type": "timings", "payload":
 * ...}`, `{"type": "ready", "version": 2, "auto": false}` or `{"type":
 * "state", "auto": true}`. Never throws; a bad message is `ignored` with a
 * reason for the console.
 */
export function readCommMessage(data: unknown): CommMessage {
  if (!isObject(data)) {
    return {
      kind: 'ignored',
      reason: `expected a JSON object, got ${show(data)}`
    };
  }
  switch (data.type) {
    case 'timings': {
      const result = validatePayload(data.payload);
      return result.ok
        ? { kind: 'timings', payload: result.payload }
        : { kind: 'ignored', reason: result.error };
    }
    case 'ready':
      if (!COMM_VERSIONS.includes(data.version as number)) {
        return {
          kind: 'ignored',
          reason:
            `the kernel speaks comm protocol version ${show(data.version)}, ` +
            `this extension speaks version ${COMM_VERSIONS.join(', ')}; update ` +
            'jupyterlab-workbench and workbench together'
        };
      }
      try {
        return {
          kind: 'ready',
          version: data.version as number,
          auto: readAuto(data, 'ready')
        };
      } catch (error) {
        return { kind: 'ignored', reason: (error as Error).message };
      }
    case 'state':
      try {
        return { kind: 'state', auto: readAuto(data, 'state') };
      } catch (error) {
        return { kind: 'ignored', reason: (error as Error).message };
      }
    default:
      return {
        kind: 'ignored',
        reason: `unknown message type ${show(data.type)}`
      };
  }
}
