/**
 * Status-bar item: the last profiled cell's kernel time and op count.
 */
import { Widget } from '@lumino/widgets';

import { formatCount, formatMs } from './format';
import { timingsIcon } from './icon';
import { ICellTimings, kernelTime } from './model';
import { CSS } from './view';

/** The status-bar widget; click opens the panel. */
export class TimingsStatus extends Widget {
  constructor(onClick: () => void) {
    super();
    this.id = 'jp-workbench-timings-status';
    this.addClass(`${CSS}-status`);
    this.addClass('jp-StatusBar-TextItem');
    this.node.setAttribute('role', 'button');
    this.node.addEventListener('click', onClick);
    timingsIcon.element({
      container: this.node.appendChild(document.createElement('span')),
      className: `${CSS}-statusIcon`,
      elementPosition: 'center',
      height: '14px',
      width: '14px'
    });
    this._text = this.node.appendChild(document.createElement('span'));
    this._text.className = `${CSS}-statusText`;
    this.setCell(null);
  }

  /** Show a cell's timings, or hide the item when there are none. */
  setCell(cell: ICellTimings | null): void {
    if (cell === null) {
      this._text.textContent = '';
      this.node.title = '';
      this.node.dataset.empty = 'true';
      this.hide();
      return;
    }
    const { payload } = cell;
    const time = kernelTime(payload);
    const calls = payload.totals.calls;
    this._text.textContent = `${formatMs(time.ms)} · ${formatCount(calls)} ops`;
    const count =
      payload.execution_count === null ? '' : ` [${payload.execution_count}]`;
    this.node.title =
      `Last profiled cell${count}: ${formatMs(time.ms)} ` +
      `${time.onDevice ? 'on the device' : 'of host op time'}, ` +
      `${formatCount(calls)} op calls in ${payload.rows.length} distinct ops, ` +
      `${formatMs(payload.wall_ms)} wall. Click to open Kernel timings.`;
    delete this.node.dataset.empty;
    this.show();
  }

  private _text: HTMLElement;
}
