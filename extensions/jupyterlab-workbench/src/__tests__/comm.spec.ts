import { Signal } from '@lumino/signaling';

import { TimingsComm, retryAfter } from '../comm';
import { COMM_TARGET, ITimingsPayload } from '../model';

const PAYLOAD: ITimingsPayload = {
  version: 1,
  cell_id: 'cell-1',
  execution_count: 1,
  wall_ms: 2,
  totals: { calls: 1, host_ms: 1, device_ms: null },
  rows: [
    {
      name: 'add',
      device: 'cpu',
      calls: 1,
      total_ms: 1,
      self_ms: 1,
      mean_ms: 1,
      device_ms: null,
      share: 1
    }
  ]
};

/** A comm as the kernel connection hands it out. */
class FakeComm {
  constructor(
    readonly kernel: FakeKernel,
    readonly commId: string
  ) {}
  onMsg: ((msg: any) => void) | null = null;
  onClose: ((msg: any) => void) | null = null;
  isDisposed = false;
  sent: unknown[] = [];
  openData: unknown = undefined;

  open(data: unknown) {
    this.openData = data;
    this.kernel.opens++;
    if (!this.kernel.hasTarget) {
      // What ipykernel does for an unknown target: close it before idle.
      this.onClose?.({ content: { comm_id: this.commId, data: {} } });
      this.isDisposed = true;
    } else {
      this.kernel.open.push(this);
    }
    return { done: Promise.resolve() };
  }
  send(data: unknown) {
    this.sent.push(data);
  }
  close() {
    this.onClose?.({});
    this.isDisposed = true;
  }
  dispose() {
    this.isDisposed = true;
  }
  /** The kernel sends a message on this comm. */
  receive(data: unknown) {
    this.onMsg?.({ content: { comm_id: this.commId, data } });
  }
}

class FakeKernel {
  status = 'idle';
  connectionStatus = 'connected';
  connectionStatusChanged = new Signal<this, string>(this);
  isDisposed = false;
  hasTarget = false;
  opens = 0;
  open: FakeComm[] = [];
  targets = new Map<string, (comm: any, msg: any) => void>();
  statusChanged = new Signal<this, string>(this);
  iopubMessage = new Signal<this, any>(this);
  private _ids = 0;

  createComm(target: string) {
    expect(target).toBe(COMM_TARGET);
    return new FakeComm(this, `comm-${++this._ids}`);
  }
  registerCommTarget(name: string, cb: (comm: any, msg: any) => void) {
    this.targets.set(name, cb);
  }
  removeCommTarget(name: string) {
    this.targets.delete(name);
  }
  setStatus(status: string) {
    this.status = status;
    this.statusChanged.emit(status);
  }
  setConnection(status: string) {
    this.connectionStatus = status;
    this.connectionStatusChanged.emit(status);
  }
  /** What KernelConnection.restart() does, as far as comms can tell. */
  restart() {
    this.setStatus('restarting');
    for (const comm of this.open) {
      comm.dispose();
    }
    this.open = [];
    this.setConnection('connecting');
    this.setConnection('connected');
  }
  /** A cell runs: busy, then idle, parented by an execute_request. */
  runCell() {
    this.setStatus('busy');
    this.setStatus('idle');
    this.iopubMessage.emit({
      header: { msg_type: 'status' },
      parent_header: { msg_type: 'execute_request' },
      content: { execution_state: 'idle' }
    });
  }
  /** The kernel opens the comm itself. */
  kernelOpens(data: unknown = {}) {
    const comm = new FakeComm(this, `kernel-${++this._ids}`);
    this.targets.get(COMM_TARGET)!(comm, { content: { data } });
    return comm;
  }
}

class FakeSession {
  kernelChanged = new Signal<this, any>(this);
  session: { kernel: FakeKernel | null } | null;
  constructor(kernel: FakeKernel | null) {
    this.session = { kernel };
  }
  changeKernel(kernel: FakeKernel | null) {
    const old = this.session?.kernel ?? null;
    this.session = { kernel };
    this.kernelChanged.emit({
      name: 'kernel',
      oldValue: old,
      newValue: kernel
    });
  }
}

/** Let pending promise callbacks run. */
const settle = () => new Promise(resolve => setTimeout(resolve, 0));

function setup(
  kernel: FakeKernel | null = new FakeKernel(),
  openTimeoutMs = 10000
) {
  const session = new FakeSession(kernel);
  const payloads: ITimingsPayload[] = [];
  const warn = jest.fn();
  const comm = new TimingsComm({
    sessionContext: session as any,
    onPayload: p => payloads.push(p),
    warn,
    openTimeoutMs
  });
  return { session, kernel, comm, payloads, warn };
}

describe('retryAfter', () => {
  it('backs off by doubling, up to every 16th cell', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 10].map(retryAfter)).toEqual([
      0, 1, 2, 4, 8, 16, 16, 16
    ]);
  });
});

describe('TimingsComm', () => {
  it('connects when the kernel has the target and says hello', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    expect(comm.state).toBe('connected');
    expect(kernel.open).toHaveLength(1);
    expect(kernel.open[0].openData).toEqual({ type: 'hello', version: 2 });
    expect(kernel.open[0].sent).toEqual([{ type: 'hello', version: 2 }]);
  });

  it('routes timings to onPayload and warns on anything bad', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { payloads, warn } = setup(kernel);
    await settle();
    const open = kernel.open[0];
    open.receive({ type: 'ready', version: 2, auto: false });
    open.receive({ type: 'timings', payload: PAYLOAD });
    open.receive({ type: 'timings', payload: { ...PAYLOAD, version: 5 } });
    open.receive({ type: 'mystery' });
    expect(payloads).toEqual([PAYLOAD]);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[0][0]).toContain('unsupported version 5');
  });

  it('fails quietly without the target and retries after cells, backing off', async () => {
    const { kernel, comm, warn } = setup();
    await settle();
    const k = kernel!;
    expect(comm.state).toBe('unavailable');
    expect(k.opens).toBe(1);
    k.runCell(); // after 1 failure: retry after 1 cell
    await settle();
    expect(k.opens).toBe(2);
    k.runCell(); // after 2 failures: wait for 2 cells
    await settle();
    expect(k.opens).toBe(2);
    k.runCell();
    await settle();
    expect(k.opens).toBe(3);
    // Status changes that are not cells (our own comm_open) do not count.
    k.setStatus('busy');
    k.setStatus('idle');
    await settle();
    expect(k.opens).toBe(3);
    expect(warn).not.toHaveBeenCalled();
  });

  it('connects after the cell that registers the target', async () => {
    const { kernel, comm, payloads } = setup();
    await settle();
    expect(comm.state).toBe('unavailable');
    kernel!.hasTarget = true; // e.g. `%load_ext workbench`
    kernel!.runCell();
    await settle();
    expect(comm.state).toBe('connected');
    kernel!.open[0].receive({ type: 'timings', payload: PAYLOAD });
    expect(payloads).toHaveLength(1);
  });

  it('opens again once reconnected after a restart', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    expect(comm.state).toBe('connected');
    const before = kernel.open[0];
    kernel.setStatus('restarting');
    expect(comm.state).toBe('connecting');
    expect(kernel.opens).toBe(1);
    // No 'idle' comes after a restart until a cell runs: the connection is enough.
    kernel.setConnection('connecting');
    expect(kernel.opens).toBe(1);
    kernel.setConnection('connected');
    await settle();
    expect(comm.state).toBe('connected');
    expect(kernel.opens).toBe(2);
    expect(before.isDisposed).toBe(true);
  });

  it('reports a restarted kernel without the target as unavailable', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    kernel.hasTarget = false;
    kernel.restart();
    await settle();
    expect(comm.state).toBe('unavailable');
  });

  it('ignores an open that a restart overtook, and opens again', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    let release: () => void = () => undefined;
    const original = FakeComm.prototype.open;
    const spy = jest
      .spyOn(FakeComm.prototype, 'open')
      .mockImplementationOnce(function (this: FakeComm, data: unknown) {
        original.call(this, data);
        return { done: new Promise<void>(resolve => (release = resolve)) };
      });
    const { comm } = setup(kernel);
    kernel.restart(); // the first open is still in flight
    release();
    await settle();
    expect(comm.state).toBe('connected');
    expect(kernel.opens).toBe(2);
    spy.mockRestore();
  });

  it('resets the backoff on restart', async () => {
    const { kernel, comm } = setup();
    await settle();
    for (let i = 0; i < 10; i++) {
      kernel!.runCell();
      await settle();
    }
    const opens = kernel!.opens;
    kernel!.hasTarget = true;
    kernel!.restart();
    await settle();
    expect(kernel!.opens).toBe(opens + 1);
    expect(comm.state).toBe('connected');
  });

  it('follows kernel changes and reports no kernel', async () => {
    const { session, comm } = setup(null);
    expect(comm.state).toBe('no-kernel');
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    session.changeKernel(kernel);
    await settle();
    expect(comm.state).toBe('connected');
    expect(kernel.targets.has(COMM_TARGET)).toBe(true);
    session.changeKernel(null);
    expect(comm.state).toBe('no-kernel');
    expect(kernel.targets.has(COMM_TARGET)).toBe(false);
    expect(kernel.open[0].isDisposed).toBe(true);
  });

  it('waits for the kernel connection before opening', async () => {
    const kernel = new FakeKernel();
    kernel.connectionStatus = 'connecting';
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    expect(kernel.opens).toBe(0);
    expect(comm.state).toBe('connecting');
    kernel.setConnection('connected');
    await settle();
    expect(comm.state).toBe('connected');
  });

  it('accepts a comm the kernel opens itself', async () => {
    const { kernel, comm, payloads } = setup();
    await settle();
    expect(comm.state).toBe('unavailable');
    const opened = kernel!.kernelOpens({ type: 'timings', payload: PAYLOAD });
    expect(comm.state).toBe('connected');
    expect(payloads).toHaveLength(1);
    opened.receive({
      type: 'timings',
      payload: { ...PAYLOAD, cell_id: 'cell-2' }
    });
    expect(payloads.map(p => p.cell_id)).toEqual(['cell-1', 'cell-2']);
    opened.close();
    expect(comm.state).toBe('unavailable');
  });

  it('gives up on an open the kernel never answers, and retries after a cell', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const comms: FakeComm[] = [];
    const original = FakeComm.prototype.open;
    const spy = jest
      .spyOn(FakeComm.prototype, 'open')
      .mockImplementationOnce(function (this: FakeComm) {
        comms.push(this);
        kernel.opens++;
        return { done: new Promise<void>(() => undefined) }; // lost in transit
      });
    const { comm } = setup(kernel, 20);
    expect(comm.state).toBe('connecting');
    await new Promise(resolve => setTimeout(resolve, 40));
    expect(comm.state).toBe('unavailable');
    expect(comms[0].isDisposed).toBe(true);
    spy.mockRestore();
    expect(FakeComm.prototype.open).toBe(original);
    kernel.runCell();
    await settle();
    expect(comm.state).toBe('connected');
    expect(kernel.opens).toBe(2);
  });

  it("keeps an open in flight when the new kernel says 'starting'", async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    let release: () => void = () => undefined;
    const original = FakeComm.prototype.open;
    const spy = jest
      .spyOn(FakeComm.prototype, 'open')
      .mockImplementationOnce(function (this: FakeComm, data: unknown) {
        original.call(this, data);
        return { done: new Promise<void>(resolve => (release = resolve)) };
      });
    const { comm } = setup(kernel);
    kernel.setStatus('starting');
    release();
    await settle();
    expect(kernel.opens).toBe(1);
    expect(comm.state).toBe('connected');
    spy.mockRestore();
  });

  it("opens again when a connected kernel says 'starting' (a new process)", async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    expect(kernel.opens).toBe(1);
    kernel.setStatus('starting');
    await settle();
    expect(kernel.opens).toBe(2);
    expect(comm.state).toBe('connected');
  });

  it("follows the kernel's auto mode from ready and state messages", async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm, warn } = setup(kernel);
    const seen: (boolean | null)[] = [];
    comm.autoChanged.connect((_, auto) => seen.push(auto));
    await settle();
    expect(comm.auto).toBeNull(); // connected, but the kernel has not said yet
    const open = kernel.open[0];
    open.receive({ type: 'ready', version: 2, auto: false });
    expect(comm.auto).toBe(false);
    open.receive({ type: 'state', auto: true });
    expect(comm.auto).toBe(true);
    open.receive({ type: 'state', auto: false });
    expect(comm.auto).toBe(false);
    // A version-1 kernel (no auto field) or a bad state changes nothing.
    open.receive({ type: 'ready', version: 1 });
    open.receive({ type: 'state', auto: 'yes' });
    expect(comm.auto).toBe(false);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[0][0]).toContain('comm protocol version 1');
    expect(warn.mock.calls[1][0]).toContain("needs 'auto' true or false");
    // A restart forgets it until the new kernel says.
    kernel.restart();
    expect(comm.auto).toBeNull();
    expect(seen).toEqual([false, true, false, null]);
  });

  it('signals restarts and kernel changes, not the first kernel', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm, session } = setup(kernel);
    let restarts = 0;
    comm.restarted.connect(() => restarts++);
    await settle();
    expect(restarts).toBe(0);
    kernel.restart();
    expect(restarts).toBe(1);
    await settle();
    kernel.setStatus('starting'); // a new process seen while connected
    expect(restarts).toBe(2);
    session.changeKernel(new FakeKernel());
    expect(restarts).toBe(3);
  });

  it("adopts the kernel's own open (auto on under Run All) over one still in flight", async () => {
    // Run All: the frontend's retry waits behind the queued cells; meanwhile
    // `%wb_profile auto on` opens a comm from the kernel, with its ready data.
    const { kernel, comm, payloads } = setup();
    await settle();
    expect(comm.state).toBe('unavailable');
    kernel!.hasTarget = true;
    let release: () => void = () => undefined;
    const original = FakeComm.prototype.open;
    const spy = jest
      .spyOn(FakeComm.prototype, 'open')
      .mockImplementationOnce(function (this: FakeComm, data: unknown) {
        original.call(this, data);
        return { done: new Promise<void>(resolve => (release = resolve)) };
      });
    kernel!.runCell(); // the retry, now queued behind the other cells
    await settle();
    const opened = kernel!.kernelOpens({
      type: 'ready',
      version: 2,
      auto: true
    });
    expect(comm.state).toBe('connected');
    expect(comm.auto).toBe(true);
    for (const id of ['a', 'b']) {
      opened.receive({ type: 'timings', payload: { ...PAYLOAD, cell_id: id } });
    }
    release(); // the queued open finally completes: closed, the kernel's stays
    await settle();
    expect(kernel!.open[0].isDisposed).toBe(true);
    expect(comm.state).toBe('connected');
    opened.receive({ type: 'timings', payload: { ...PAYLOAD, cell_id: 'c' } });
    expect(payloads.map(p => p.cell_id)).toEqual(['a', 'b', 'c']);
    spy.mockRestore();
  });

  it('stops listening when disposed', async () => {
    const kernel = new FakeKernel();
    kernel.hasTarget = true;
    const { comm } = setup(kernel);
    await settle();
    comm.dispose();
    expect(comm.isDisposed).toBe(true);
    expect(kernel.open[0].isDisposed).toBe(true);
    kernel.restart();
    await settle();
    expect(kernel.opens).toBe(1);
  });
});
