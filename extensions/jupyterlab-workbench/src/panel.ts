/**
 * The "Kernel timings" sidebar: a section per profiled cell of the active
 * notebook, with sortable op tables, inline bars, totals, device filter and
 * clear.
 */
import { ISignal } from '@lumino/signaling';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { formatMs, shortId } from './format';
import {
  AutoState,
  DEFAULT_SORT,
  ICellTimings,
  ISortState,
  SortKey,
  TimingsStore,
  filterRows,
  nextSort,
  summarize
} from './model';
import { CSS, el, renderSummary, renderTable } from './view';

/** What the panel needs to know about a cell of the notebook. */
export interface ICellInfo {
  index: number;
  executionCount: number | null;
  /** From JupyterLab's execution metadata, null when not recorded. */
  labWallMs: number | null;
}

/** A notebook as the panel sees it. */
export interface INotebookTimings {
  readonly name: string;
  readonly store: TimingsStore;
  /** Null when the cell is not (or no longer) in the notebook. */
  cellInfo(key: string): ICellInfo | null;
  readonly autoState: AutoState;
  /** The kernel's auto mode once it said, else null. */
  readonly autoOn: boolean | null;
  /** Emits when something besides the store changed (metadata, comm state). */
  readonly refreshed: ISignal<unknown, void>;
}

export namespace TimingsPanel {
  export interface IOptions {
    /** Called when the user clicks a cell's section. */
    onCellClick: (key: string) => void;
  }
}

/** The badge's words: the comm's state, and once connected auto mode's. */
export type BadgeState =
  Exclude<AutoState, 'connected'> | 'auto-on' | 'auto-off';

const BADGE_LABEL: Record<BadgeState, [string, string]> = {
  'no-kernel': ['no kernel', 'The notebook has no running kernel.'],
  connecting: ['connecting', 'Opening the workbench.timings comm…'],
  'auto-on': [
    'auto: on',
    'Auto mode is on: every cell is profiled and its timings appear here ' +
      'without any output. %wb_profile auto off turns it off.'
  ],
  'auto-off': [
    'auto: off',
    'Connected to workbench in the kernel, auto mode is off: only ' +
      '%%wb_profile cells are timed. %wb_profile auto on times every cell.'
  ],
  unavailable: [
    'not loaded',
    'The kernel has not loaded workbench (run %load_ext workbench); ' +
      'retried after the next cell runs or the kernel restarts.'
  ]
};

/** What the badge shows for a comm state and the kernel's auto mode. */
export function badgeState(state: AutoState, auto: boolean | null): BadgeState {
  if (state !== 'connected') {
    return state;
  }
  return auto ? 'auto-on' : 'auto-off';
}

/** The sidebar widget. */
export class TimingsPanel extends Widget {
  constructor(options: TimingsPanel.IOptions) {
    super();
    this._onCellClick = options.onCellClick;
    this.id = 'jp-workbench-timings';
    this.addClass(CSS);
    this.title.caption = 'Kernel timings';

    const header = el('div', `${CSS}-header`);
    header.appendChild(el('h2', `${CSS}-title`, 'Kernel timings'));
    this._notebookName = el('span', `${CSS}-notebook`);
    header.appendChild(this._notebookName);
    this._autoBadge = el('span', `${CSS}-auto`);
    header.appendChild(this._autoBadge);
    this.node.appendChild(header);

    const toolbar = el('div', `${CSS}-toolbar`);
    const label = el('label', `${CSS}-filterLabel`, 'Device ');
    this._deviceSelect = el('select', `${CSS}-deviceFilter`);
    this._deviceSelect.addEventListener('change', () => {
      const value = this._deviceSelect.value;
      this._device = value === '' ? null : value;
      this.update();
    });
    label.appendChild(this._deviceSelect);
    toolbar.appendChild(label);
    this._clearButton = el('button', `${CSS}-clear`, 'Clear');
    this._clearButton.title = 'Forget the timings of this notebook';
    this._clearButton.addEventListener('click', () => this.clear());
    toolbar.appendChild(this._clearButton);
    this.node.appendChild(toolbar);

    this._body = el('div', `${CSS}-body`);
    this.node.appendChild(this._body);
    this.update();
  }

  /** The notebook shown, or null. */
  get source(): INotebookTimings | null {
    return this._source;
  }

  set source(source: INotebookTimings | null) {
    if (source === this._source) {
      return;
    }
    if (this._source) {
      this._source.store.changed.disconnect(this._onChange, this);
      this._source.refreshed.disconnect(this._onChange, this);
    }
    this._source = source;
    if (source) {
      source.store.changed.connect(this._onChange, this);
      source.refreshed.connect(this._onChange, this);
    }
    this._body.scrollTop = 0;
    this.update();
  }

  /** Current sort, shared by every cell's table. */
  get sort(): ISortState {
    return this._sort;
  }

  /** The device shown, null for all. */
  get device(): string | null {
    return this._device;
  }

  set device(device: string | null) {
    this._device = device;
    this.update();
  }

  /** Forget the timings of the current notebook. */
  clear(): void {
    this._source?.store.clear();
  }

  dispose(): void {
    this.source = null;
    super.dispose();
  }

  protected onUpdateRequest(msg: Message): void {
    this._render();
  }

  protected onAfterShow(msg: Message): void {
    this.update();
  }

  private _onChange(): void {
    if (this.isVisible) {
      this.update();
    }
  }

  private _sortBy(key: SortKey): void {
    this._sort = nextSort(this._sort, key);
    this.update();
  }

  private _render(): void {
    const source = this._source;
    this._notebookName.textContent = source ? source.name : '';
    this._notebookName.title = source ? source.name : '';
    const state: AutoState = source ? source.autoState : 'no-kernel';
    const badge = badgeState(state, source ? source.autoOn : null);
    this._autoBadge.textContent = source ? BADGE_LABEL[badge][0] : '';
    this._autoBadge.title = source ? BADGE_LABEL[badge][1] : '';
    this._autoBadge.dataset.state = state;
    this._autoBadge.dataset.auto =
      badge === 'auto-on' ? 'on' : badge === 'auto-off' ? 'off' : 'unknown';
    this._autoBadge.hidden = !source;
    this._renderDeviceOptions(source ? source.store.devices() : []);
    this._clearButton.disabled = !source || source.store.size === 0;

    const scroll = this._body.scrollTop;
    this._body.replaceChildren();
    if (!source) {
      this._body.appendChild(
        el('div', `${CSS}-empty`, 'Open a notebook to see its kernel timings.')
      );
      return;
    }
    const cells = source.store.cells(key => source.cellInfo(key)?.index ?? -1);
    let shown = 0;
    for (const cell of cells) {
      const section = this._renderCell(source, cell);
      if (section) {
        this._body.appendChild(section);
        shown++;
      }
    }
    if (shown === 0) {
      const empty = el('div', `${CSS}-empty`);
      empty.appendChild(
        el(
          'p',
          undefined,
          cells.length === 0
            ? 'No timings yet for this notebook.'
            : `No ops on ${this._device} in this notebook.`
        )
      );
      if (cells.length === 0) {
        empty.appendChild(
          el(
            'p',
            undefined,
            'Run a cell with %%wb_profile, or turn on %wb_profile auto on to ' +
              'time every cell.'
          )
        );
      }
      this._body.appendChild(empty);
    }
    this._body.scrollTop = scroll;
  }

  private _renderCell(
    source: INotebookTimings,
    cell: ICellTimings
  ): HTMLElement | null {
    const rows = filterRows(cell.payload.rows, this._device);
    if (rows.length === 0 && this._device !== null) {
      return null;
    }
    const info = source.cellInfo(cell.key);
    const section = el('section', `${CSS}-cell`);
    section.dataset.cellId = cell.key;
    section.dataset.source = cell.source;
    if (cell.stale) {
      section.dataset.stale = 'true';
      section.classList.add(`${CSS}-stale`);
    }

    const header = el('div', `${CSS}-cellHeader`);
    // The payload's count names the profiled run; a later unprofiled run of
    // the same cell changes the cell's count and its execution metadata.
    const count = cell.payload.execution_count ?? info?.executionCount ?? null;
    const sameRun =
      info !== null &&
      (cell.payload.execution_count === null ||
        info.executionCount === cell.payload.execution_count);
    const labWallMs = sameRun ? info.labWallMs : null;
    header.appendChild(
      el('span', `${CSS}-prompt`, count === null ? '[ ]' : `[${count}]`)
    );
    const name = el(
      'span',
      `${CSS}-cellName`,
      info ? `cell ${info.index + 1}` : 'cell not in notebook'
    );
    name.title = `cell id ${cell.key}`;
    header.appendChild(name);
    header.appendChild(el('span', `${CSS}-cellId`, shortId(cell.key)));
    if (cell.source === 'comm') {
      header.appendChild(el('span', `${CSS}-tag`, 'auto'));
    }
    if (cell.stale) {
      const tag = el('span', `${CSS}-staleTag`, 'old kernel');
      tag.title =
        'Timed by the kernel before its last restart: run the cell again ' +
        'for current numbers.';
      header.appendChild(tag);
    }
    const summary = summarize(cell.payload, this._device);
    header.appendChild(
      el('span', `${CSS}-cellTotal`, formatMs(summary.hostMs))
    );
    if (info) {
      header.classList.add(`${CSS}-clickable`);
      header.title = 'Scroll to this cell';
      header.tabIndex = 0;
      header.setAttribute('role', 'button');
      const go = () => this._onCellClick(cell.key);
      header.addEventListener('click', go);
      header.addEventListener('keydown', event => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          go();
        }
      });
    }
    section.appendChild(header);
    section.appendChild(renderSummary(summary, labWallMs));
    section.appendChild(
      renderTable(rows, this._sort, key => this._sortBy(key))
    );
    return section;
  }

  private _renderDeviceOptions(devices: string[]): void {
    if (this._device !== null && !devices.includes(this._device)) {
      devices = [...devices, this._device];
    }
    const wanted = ['', ...devices];
    const existing = Array.from(this._deviceSelect.options).map(o => o.value);
    if (wanted.join('\n') !== existing.join('\n')) {
      this._deviceSelect.replaceChildren(
        ...wanted.map(value => {
          const option = el('option', undefined, value || 'All devices');
          option.value = value;
          return option;
        })
      );
    }
    this._deviceSelect.value = this._device ?? '';
  }

  private _onCellClick: (key: string) => void;
  private _source: INotebookTimings | null = null;
  private _sort: ISortState = DEFAULT_SORT;
  private _device: string | null = null;
  private _body: HTMLElement;
  private _notebookName: HTMLElement;
  private _autoBadge: HTMLElement;
  private _deviceSelect: HTMLSelectElement;
  private _clearButton: HTMLButtonElement;
}
