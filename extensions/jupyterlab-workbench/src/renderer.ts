/**
 * MIME renderer for `application/vnd.workbench.timings+json`: the op table
 * inline in the notebook, so a saved notebook still shows its timings.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { formatMs } from './format';
import {
  DEFAULT_SORT,
  ISortState,
  ITimingsPayload,
  LOG_PREFIX,
  MIME_TYPE,
  nextSort,
  readDisplayHint,
  sortRows,
  summarize,
  validatePayload
} from './model';
import { CSS, el, renderSummary, renderTable } from './view';

/** Renders one cell's timings payload. */
export class TimingsOutput extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass(`${CSS}-output`);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    const result = validatePayload(data);
    if (!result.ok) {
      console.warn(
        `${LOG_PREFIX} cannot render a timings output: ${result.error}`
      );
      this._payload = null;
      this.node.replaceChildren(
        el('div', `${CSS}-invalid`, `workbench timings: ${result.error}`)
      );
      return Promise.resolve();
    }
    this._payload = result.payload;
    const hint = readDisplayHint(
      (model.metadata as Record<string, unknown>)[this._mimeType]
    );
    this._sort = hint.sort;
    this._limit = hint.rows;
    this._draw();
    return Promise.resolve();
  }

  private _draw(): void {
    const payload = this._payload as ITimingsPayload;
    const summary = summarize(payload);
    const all = payload.rows.length;
    // `-n`: the top rows under the current sort, as the text table shows them.
    const limited = this._limit !== null && this._limit < all;
    const rows = limited
      ? sortRows(payload.rows, this._sort).slice(0, this._limit as number)
      : payload.rows;
    const title = el('div', `${CSS}-outputTitle`);
    title.appendChild(el('span', `${CSS}-outputName`, 'Kernel timings'));
    const ops = limited ? `${rows.length} of ${all} ops` : `${all} ops`;
    title.appendChild(
      el(
        'span',
        `${CSS}-outputMeta`,
        `${ops} · ${formatMs(summary.hostMs)} in ops`
      )
    );
    if (limited) {
      const more = el('button', `${CSS}-showAll`, 'show all');
      more.title = 'Show every op of this cell';
      more.addEventListener('click', () => {
        this._limit = null;
        this._draw();
      });
      title.appendChild(more);
    }
    this.node.replaceChildren(
      title,
      renderSummary(summary, null),
      renderTable(rows, this._sort, key => {
        this._sort = nextSort(this._sort, key);
        this._draw();
      })
    );
  }

  private _mimeType: string;
  private _payload: ITimingsPayload | null = null;
  private _sort: ISortState = DEFAULT_SORT;
  private _limit: number | null = null;
}

/** The renderer factory. */
export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new TimingsOutput(options)
};

/** Registered through `jupyterlab.mimeExtension` in package.json. */
const extension: IRenderMime.IExtension = {
  id: 'jupyterlab-workbench:renderer',
  rendererFactory,
  rank: 0,
  dataType: 'json'
};

export default extension;
