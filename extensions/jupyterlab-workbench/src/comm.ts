/**
 * Auto mode: keep a `workbench.timings` comm open to a notebook's kernel.
 *
 * The frontend opens the comm as soon as the kernel connection is up, and
 * again after every restart (the kernel connection queues the open until the
 * kernel answers its kernel_info request). A kernel without the target
 * (workbench not loaded yet) closes it at once; that is not an error: the
 * open is retried after the next executed cell, backing off to every 16th
 * cell so a notebook that never loads workbench does not fill the kernel log.
 * A kernel may also open the comm itself: it does when auto mode is turned on
 * and it has no comm, because under Run All the frontend's own open waits on
 * the shell channel behind the queued cells, while the kernel's open arrives
 * on iopub at once. Both ways end in the same handler.
 *
 * The kernel tells its auto mode (`ready` and `state` messages, comm protocol
 * version 2): `auto` is true or false once known, null before.
 *
 * Restarts are not seen through an 'idle' status: JupyterLab does not track
 * the status of kernel_info requests, so a restarted kernel stays 'starting'
 * until a cell runs. The open waits for the connection instead.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import {
  AutoState,
  COMM_TARGET,
  COMM_VERSIONS,
  ITimingsPayload,
  LOG_PREFIX,
  readCommMessage
} from './model';

/** Executed cells to wait before the next open after `failures` failed ones. */
export function retryAfter(failures: number): number {
  return failures <= 0 ? 0 : Math.min(2 ** (failures - 1), 16);
}

export namespace TimingsComm {
  export interface IOptions {
    sessionContext: ISessionContext;
    /** Called with every valid payload the kernel sends. */
    onPayload: (payload: ITimingsPayload) => void;
    /** Where rejected messages are reported; console.warn by default. */
    warn?: (message: string) => void;
    /** How long an open may wait for the kernel; 10 s by default. */
    openTimeoutMs?: number;
  }
}

/** Close a comm, telling the kernel if it can still be told. */
function closeQuietly(comm: Kernel.IComm): void {
  try {
    comm.close();
  } catch {
    comm.dispose();
  }
}

/** The auto-mode connection of one notebook. */
export class TimingsComm {
  constructor(options: TimingsComm.IOptions) {
    this._session = options.sessionContext;
    this._onPayload = options.onPayload;
    this._warn = options.warn ?? console.warn;
    this._openTimeoutMs = options.openTimeoutMs ?? 10000;
    this._session.kernelChanged.connect(this._onKernelChanged, this);
    this._setKernel(this._session.session?.kernel ?? null);
  }

  get state(): AutoState {
    return this._state;
  }

  get stateChanged(): ISignal<this, AutoState> {
    return this._stateChanged;
  }

  /** The kernel's auto mode, null until it said (or after a restart). */
  get auto(): boolean | null {
    return this._auto;
  }

  /** Emits when the kernel's auto mode changes (or becomes unknown). */
  get autoChanged(): ISignal<this, boolean | null> {
    return this._autoChanged;
  }

  /** Emits when the kernel restarts or is replaced: what it sent is stale. */
  get restarted(): ISignal<this, void> {
    return this._restarted;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._session.kernelChanged.disconnect(this._onKernelChanged, this);
    this._setKernel(null);
    this._disposed = true;
    Signal.clearData(this);
  }

  private _onKernelChanged(
    _: unknown,
    change: { newValue: Kernel.IKernelConnection | null }
  ): void {
    this._setKernel(change.newValue);
  }

  private _setKernel(kernel: Kernel.IKernelConnection | null): void {
    const old = this._kernel;
    if (old) {
      old.statusChanged.disconnect(this._onStatus, this);
      old.connectionStatusChanged.disconnect(this._onConnection, this);
      old.iopubMessage.disconnect(this._onIOPub, this);
      if (!old.isDisposed) {
        old.removeCommTarget(COMM_TARGET, this._onKernelOpen);
      }
    }
    this._dropComm();
    this._reset();
    if (old) {
      this._restarted.emit();
    }
    this._kernel = kernel;
    if (!kernel) {
      this._pending = false;
      this._setState('no-kernel');
      return;
    }
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.connectionStatusChanged.connect(this._onConnection, this);
    kernel.iopubMessage.connect(this._onIOPub, this);
    kernel.registerCommTarget(COMM_TARGET, this._onKernelOpen);
    this._openIfPending();
  }

  /** Forget every attempt: a new kernel, or a new kernel process. */
  private _reset(): void {
    this._generation++;
    this._opening = false;
    this._failures = 0;
    this._executed = 0;
    this._pending = true;
    this._setAuto(null);
    this._setState('connecting');
  }

  private _onConnection(
    kernel: Kernel.IKernelConnection,
    status: Kernel.ConnectionStatus
  ): void {
    if (status === 'connected') {
      this._openIfPending();
    }
  }

  private _onStatus(kernel: Kernel.IKernelConnection, status: string): void {
    switch (status) {
      case 'restarting':
      case 'autorestarting':
        // The kernel connection drops its comms right after this signal;
        // open again once it is connected to the new kernel.
        this._dropComm(false);
        this._reset();
        this._restarted.emit();
        break;
      case 'starting':
        // A new kernel process. An open already on its way is kept (the
        // connection queues it until the kernel answers); one that was lost
        // in the restart ends by timing out.
        if (this._comm) {
          this._dropComm(false);
          this._reset();
          this._restarted.emit();
        }
        this._openIfPending();
        break;
      case 'dead':
        this._dropComm(false);
        this._reset();
        this._pending = false;
        this._setState('no-kernel');
        break;
      case 'idle':
      case 'busy':
        this._openIfPending();
        break;
    }
  }

  private _openIfPending(): void {
    if (this._pending && this._kernel?.connectionStatus === 'connected') {
      void this._open();
    }
  }

  private _onIOPub(
    kernel: Kernel.IKernelConnection,
    msg: KernelMessage.IIOPubMessage
  ): void {
    // Count cells, not our own comm_open round trips, which also go busy/idle.
    const parent = msg.parent_header as Partial<KernelMessage.IHeader>;
    if (
      msg.header.msg_type !== 'status' ||
      (msg.content as { execution_state?: string }).execution_state !==
        'idle' ||
      parent.msg_type !== 'execute_request'
    ) {
      return;
    }
    this._executed++;
    if (
      !this._comm &&
      !this._opening &&
      this._executed >= retryAfter(this._failures)
    ) {
      void this._open();
    }
  }

  private async _open(): Promise<void> {
    const kernel = this._kernel;
    if (!kernel || kernel.isDisposed || this._comm || this._opening) {
      return;
    }
    const generation = this._generation;
    this._pending = false;
    this._opening = true;
    this._executed = 0;
    this._setState('connecting');
    const { comm, open } = await this._tryOpen(kernel);
    if (this._disposed || generation !== this._generation) {
      // A restart or a kernel change overtook this attempt and started over.
      if (open && comm && !comm.isDisposed) {
        closeQuietly(comm);
      }
      return;
    }
    this._opening = false;
    if (this._comm) {
      // The kernel opened one meanwhile (auto mode turned on): keep that one.
      if (open && comm && !comm.isDisposed) {
        closeQuietly(comm);
      }
      return;
    }
    if (!open || !comm) {
      this._failed();
      return;
    }
    this._adopt(comm);
    comm.send({ type: 'hello', version: COMM_VERSIONS[0] });
  }

  /**
   * Open a comm and wait for the kernel's answer: a kernel without the
   * target closes it before it goes idle. Gives up after `openTimeoutMs`.
   */
  private async _tryOpen(
    kernel: Kernel.IKernelConnection
  ): Promise<{ comm: Kernel.IComm | null; open: boolean }> {
    let comm: Kernel.IComm | null = null;
    let closed = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const created = kernel.createComm(COMM_TARGET);
      comm = created;
      created.onClose = () => {
        closed = true;
        if (this._comm === created) {
          this._comm = null;
          this._setAuto(null);
          this._failed();
        }
      };
      created.onMsg = msg => this._handle(msg.content.data);
      const done = created
        .open({ type: 'hello', version: COMM_VERSIONS[0] })
        .done.then(
          () => true,
          () => false // the future was disposed: a restart or a dead kernel
        );
      const timeout = new Promise<boolean>(resolve => {
        timer = setTimeout(() => resolve(false), this._openTimeoutMs);
      });
      if (!(await Promise.race([done, timeout]))) {
        // Lost on the way (e.g. sent while the kernel restarted), cancelled,
        // or stuck behind a long cell: give up; the next executed cell retries.
        closeQuietly(created);
        return { comm, open: false };
      }
    } catch {
      return { comm, open: false };
    } finally {
      clearTimeout(timer);
    }
    return { comm, open: !closed && !comm.isDisposed };
  }

  private _onKernelOpen = (
    comm: Kernel.IComm,
    msg: KernelMessage.ICommOpenMsg
  ): void => {
    comm.onMsg = message => this._handle(message.content.data);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._comm = null;
        this._pending = true;
        this._setAuto(null);
        this._setState('unavailable');
      }
    };
    if (!this._comm) {
      this._adopt(comm);
    }
    this._handle(msg.content.data, true);
  };

  private _adopt(comm: Kernel.IComm): void {
    this._comm = comm;
    this._failures = 0;
    this._setState('connected');
  }

  private _failed(): void {
    this._failures++;
    this._setState('unavailable');
  }

  /** Forget the comm; `close` tells a live kernel too. */
  private _dropComm(close = true): void {
    const comm = this._comm;
    this._comm = null;
    if (!comm || comm.isDisposed) {
      return;
    }
    if (close && this._kernel && !this._kernel.isDisposed) {
      closeQuietly(comm);
    } else {
      comm.dispose();
    }
  }

  private _handle(data: unknown, quietIfEmpty = false): void {
    if (
      quietIfEmpty &&
      (data === undefined ||
        data === null ||
        (typeof data === 'object' && Object.keys(data).length === 0))
    ) {
      return;
    }
    const message = readCommMessage(data);
    if (message.kind === 'timings') {
      this._onPayload(message.payload);
    } else if (message.kind === 'ready' || message.kind === 'state') {
      this._setAuto(message.auto);
    } else if (message.kind === 'ignored') {
      this._warn(
        `${LOG_PREFIX} ignored a message on the ${COMM_TARGET} comm: ${message.reason}`
      );
    }
  }

  private _setAuto(auto: boolean | null): void {
    if (auto !== this._auto) {
      this._auto = auto;
      this._autoChanged.emit(auto);
    }
  }

  private _setState(state: AutoState): void {
    if (state !== this._state) {
      this._state = state;
      this._stateChanged.emit(state);
    }
  }

  private _session: ISessionContext;
  private _onPayload: (payload: ITimingsPayload) => void;
  private _warn: (message: string) => void;
  private _openTimeoutMs: number;
  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _opening = false;
  private _pending = false;
  private _failures = 0;
  private _executed = 0;
  private _disposed = false;
  /** Bumped by every restart and kernel change, to spot stale opens. */
  private _generation = 0;
  private _state: AutoState = 'no-kernel';
  private _stateChanged = new Signal<this, AutoState>(this);
  private _auto: boolean | null = null;
  private _autoChanged = new Signal<this, boolean | null>(this);
  private _restarted = new Signal<this, void>(this);
}
