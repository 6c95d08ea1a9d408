/**
 * DOM builders shared by the sidebar panel and the MIME renderer: the op
 * table with sortable headers and inline bars, and a cell's totals line.
 */
import { barWidth, formatCount, formatMs, formatShare } from './format';
import {
  ICellSummary,
  ISortState,
  ITimingRow,
  SortKey,
  sortRows
} from './model';

/** Class prefix of every element this extension draws. */
export const CSS = 'jp-WorkbenchTimings';

interface IColumn {
  key: SortKey;
  label: string;
  numeric: boolean;
  title: string;
}

const COLUMNS: ReadonlyArray<IColumn> = [
  { key: 'name', label: 'Op', numeric: false, title: 'Op name' },
  {
    key: 'device',
    label: 'Device',
    numeric: false,
    title: 'Device the op ran on'
  },
  { key: 'calls', label: 'Calls', numeric: true, title: 'Number of calls' },
  {
    key: 'total_ms',
    label: 'Total',
    numeric: true,
    title: 'Host time including nested ops'
  },
  {
    key: 'mean_ms',
    label: 'Mean',
    numeric: true,
    title: 'Mean host time per call'
  },
  {
    key: 'device_ms',
    label: 'Device time',
    numeric: true,
    title: 'Time measured on the device (CUDA events, Metal GPU times)'
  },
  {
    key: 'share',
    label: 'Share',
    numeric: true,
    title: "Self time as a share of the cell's op time"
  }
];

/** Create an element with a class and optional text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** An inline bar, `fraction` of its track filled. */
export function bar(fraction: number, variant = ''): HTMLElement {
  const track = el('span', `${CSS}-bar ${variant}`.trim());
  const fill = el('span', `${CSS}-barFill`);
  fill.style.width = barWidth(fraction);
  track.appendChild(fill);
  return track;
}

/**
 * The op table of one cell.
 *
 * @param onSort - called with the clicked column; without it the headers
 *   are plain labels.
 */
export function renderTable(
  rows: ReadonlyArray<ITimingRow>,
  sort: ISortState,
  onSort?: (key: SortKey) => void
): HTMLTableElement {
  const showDevice = rows.some(row => row.device_ms !== null);
  const columns = COLUMNS.filter(c => c.key !== 'device_ms' || showDevice);
  const table = el('table', `${CSS}-table`);

  const head = el('tr');
  for (const column of columns) {
    const th = el('th', column.numeric ? `${CSS}-num` : undefined);
    th.dataset.sortKey = column.key;
    th.title = column.title;
    const active = sort.key === column.key;
    th.setAttribute(
      'aria-sort',
      active ? (sort.descending ? 'descending' : 'ascending') : 'none'
    );
    const label = onSort ? el('button', `${CSS}-sort`) : el('span');
    label.textContent = column.label;
    if (active) {
      label.appendChild(
        el('span', `${CSS}-arrow`, sort.descending ? '▼' : '▲')
      );
    }
    if (onSort) {
      label.addEventListener('click', event => {
        event.stopPropagation();
        onSort(column.key);
      });
    }
    th.appendChild(label);
    head.appendChild(th);
  }
  table.appendChild(el('thead')).appendChild(head);

  const body = el('tbody');
  for (const row of sortRows(rows, sort)) {
    const tr = el('tr', `${CSS}-row`);
    tr.dataset.op = row.name;
    tr.dataset.device = row.device;
    tr.title = describeRow(row);
    for (const column of columns) {
      tr.appendChild(cellFor(row, column));
    }
    body.appendChild(tr);
  }
  table.appendChild(body);
  return table;
}

/** Everything about a row in one sentence, for when columns are hidden. */
export function describeRow(row: ITimingRow): string {
  const device =
    row.device_ms === null ? '' : `, ${formatMs(row.device_ms)} on the device`;
  return (
    `${row.name} on ${row.device}: ${formatCount(row.calls)} calls, ` +
    `${formatMs(row.total_ms)} total (${formatMs(row.self_ms)} self), ` +
    `${formatMs(row.mean_ms)} mean${device}, ` +
    `${formatShare(row.share)} of the cell's op time`
  );
}

function cellFor(row: ITimingRow, column: IColumn): HTMLTableCellElement {
  const td = el('td', column.numeric ? `${CSS}-num` : undefined);
  td.dataset.column = column.key;
  switch (column.key) {
    case 'name':
      td.classList.add(`${CSS}-op`);
      td.appendChild(el('span', `${CSS}-opName`, row.name));
      // Shown instead of the device column when the table is narrow.
      td.appendChild(
        el('span', `${CSS}-device ${CSS}-deviceInline`, row.device)
      );
      break;
    case 'device':
      td.appendChild(el('span', `${CSS}-device`, row.device));
      break;
    case 'calls':
      td.textContent = formatCount(row.calls);
      break;
    case 'total_ms':
      td.textContent = formatMs(row.total_ms);
      td.title = `self ${formatMs(row.self_ms)}`;
      break;
    case 'mean_ms':
      td.textContent = formatMs(row.mean_ms);
      break;
    case 'device_ms':
      td.textContent = formatMs(row.device_ms);
      break;
    case 'share': {
      const wrap = td.appendChild(el('span', `${CSS}-shareCell`));
      wrap.appendChild(bar(row.share));
      wrap.appendChild(el('span', `${CSS}-shareText`, formatShare(row.share)));
      break;
    }
  }
  return td;
}

/**
 * A cell's totals: calls, host op time, device time, and the wall times of
 * the kernel and of JupyterLab, with a meter of device time against wall.
 */
export function renderSummary(
  summary: ICellSummary,
  labWallMs: number | null
): HTMLElement {
  const node = el('div', `${CSS}-summary`);
  const stat = (label: string, value: string, title: string) => {
    const item = el('span', `${CSS}-stat`);
    item.title = title;
    item.appendChild(el('span', `${CSS}-statLabel`, label));
    item.appendChild(el('span', `${CSS}-statValue`, value));
    node.appendChild(item);
    return item;
  };
  stat(
    'calls',
    formatCount(summary.calls),
    `${formatCount(summary.calls)} op calls in ${summary.ops} distinct ops`
  ).dataset.stat = 'calls';
  stat('ops', formatMs(summary.hostMs), 'Host time spent in ops').dataset.stat =
    'host';
  stat(
    'device',
    formatMs(summary.deviceMs),
    summary.deviceMs === null
      ? 'No device timing for these ops'
      : 'Time measured on the device'
  ).dataset.stat = 'device';
  stat(
    'wall',
    formatMs(summary.kernelWallMs),
    'Wall time of the cell measured by the kernel'
  ).dataset.stat = 'wall';
  if (labWallMs !== null) {
    stat(
      'lab',
      formatMs(labWallMs),
      "Wall time from JupyterLab's execution metadata (execute_input to execute_reply)"
    ).dataset.stat = 'lab';
  }

  const wall = Math.max(labWallMs ?? summary.kernelWallMs, Number.EPSILON);
  const meter = el('div', `${CSS}-meter`);
  meter.title =
    `ops ${formatMs(summary.hostMs)} and device ${formatMs(summary.deviceMs)}` +
    ` of ${formatMs(wall)} wall`;
  meter.appendChild(bar(summary.hostMs / wall, `${CSS}-bar-host`));
  if (summary.deviceMs !== null) {
    meter.appendChild(bar(summary.deviceMs / wall, `${CSS}-bar-device`));
  }
  node.appendChild(meter);
  return node;
}
