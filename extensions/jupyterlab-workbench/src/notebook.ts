/**
 * One notebook's timings: its store, fed by the outputs of its cells and by
 * the auto-mode comm, and what the panel asks about its cells.
 */
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { ISignal, Signal } from '@lumino/signaling';

import { TimingsComm } from './comm';
import {
  AutoState,
  ITimingsPayload,
  MIME_TYPE,
  TimingsStore,
  executionWallMs,
  parsePayload
} from './model';
import { ICellInfo, INotebookTimings } from './panel';

/** The timings of the notebook behind one document context. */
export class NotebookTimings implements INotebookTimings {
  constructor(panel: NotebookPanel) {
    this._context = panel.context;
    this.comm = new TimingsComm({
      sessionContext: panel.sessionContext,
      onPayload: payload => this._onCommPayload(payload)
    });
    this.comm.stateChanged.connect(this._emitRefreshed, this);
    this.comm.autoChanged.connect(this._emitRefreshed, this);
    // The panel shows the notebook's name: follow renames (and "New Notebook"
    // naming an Untitled one after it is shown).
    this._context.pathChanged.connect(this._emitRefreshed, this);
    // Timings of the previous kernel stay, marked, until their cells run again.
    this.comm.restarted.connect(() => this.store.markStale(), this);
    void this._context.ready.then(() => {
      if (!this._disposed) {
        this._watchModel();
      }
    });
  }

  readonly store = new TimingsStore();
  readonly comm: TimingsComm;

  get name(): string {
    return this._context.path.split('/').pop() ?? this._context.path;
  }

  get autoState(): AutoState {
    return this.comm.state;
  }

  get autoOn(): boolean | null {
    return this.comm.auto;
  }

  get refreshed(): ISignal<this, void> {
    return this._refreshed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Index of a cell in the notebook, or -1. */
  cellIndex(key: string): number {
    return this._positions().get(key) ?? -1;
  }

  cellInfo(key: string): ICellInfo | null {
    const index = this.cellIndex(key);
    const model = this._context.model;
    if (index < 0 || !model) {
      return null;
    }
    const cell = model.cells.get(index);
    const executionCount =
      cell.type === 'code' ? (cell as ICodeCellModel).executionCount : null;
    return {
      index,
      executionCount,
      labWallMs: executionWallMs({ execution: cell.getMetadata('execution') })
    };
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.comm.dispose();
    Signal.clearData(this);
  }

  private _watchModel(): void {
    const model = this._context.model;
    model.cells.changed.connect(this._onCellsChanged, this);
    this._onCellsChanged();
  }

  private _onCellsChanged(): void {
    this._index = null;
    const model = this._context.model;
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      if (this._watched.has(cell)) {
        continue;
      }
      this._watched.add(cell);
      if (cell.type === 'code') {
        (cell as ICodeCellModel).outputs.changed.connect(() =>
          this._scanCell(cell)
        );
      }
      cell.metadataChanged.connect((_, change) => {
        if (change.key === 'execution') {
          this._emitRefreshed();
        }
      });
      this._scanCell(cell);
    }
    this._emitRefreshed();
  }

  private _scanCell(cell: ICellModel): void {
    if (this._disposed || cell.type !== 'code') {
      return;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    // The last timings output of a cell wins, as for a re-run.
    for (let i = outputs.length - 1; i >= 0; i--) {
      const data = outputs.get(i).data[MIME_TYPE];
      if (data !== undefined) {
        const payload = parsePayload(data, `the outputs of cell ${cell.id}`);
        if (payload) {
          this.store.add(payload, 'output', cell.id);
        }
        return;
      }
    }
  }

  private _onCommPayload(payload: ITimingsPayload): void {
    let cellId = payload.cell_id;
    if (cellId === null && payload.execution_count !== null) {
      cellId = this._cellWithCount(payload.execution_count);
    }
    this.store.add(payload, 'comm', cellId);
  }

  private _cellWithCount(count: number): string | null {
    const model = this._context.model;
    for (let i = 0; model && i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      if (
        cell.type === 'code' &&
        (cell as ICodeCellModel).executionCount === count
      ) {
        return cell.id;
      }
    }
    return null;
  }

  private _positions(): Map<string, number> {
    if (this._index === null) {
      this._index = new Map();
      const model = this._context.model;
      for (let i = 0; model && i < model.cells.length; i++) {
        this._index.set(model.cells.get(i).id, i);
      }
    }
    return this._index;
  }

  private _emitRefreshed(): void {
    if (!this._disposed) {
      this._refreshed.emit();
    }
  }

  private _context: NotebookPanel['context'];
  private _index: Map<string, number> | null = null;
  private _watched = new WeakSet<ICellModel>();
  private _disposed = false;
  private _refreshed = new Signal<this, void>(this);
}
