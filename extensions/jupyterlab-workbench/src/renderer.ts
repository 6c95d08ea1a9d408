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
    this._draw();
    return Promise.resolve();
  }

  private _draw(): void {
    const payload = this._payload as ITimingsPayload;
    const summary = summarize(payload);
    const title = el('div', `${CSS}-outputTitle`);
    title.appendChild(el('span', `${CSS}-outputName`, 'Kernel timings'));
    title.appendChild(
      el(
        'span',
        `${CSS}-outputMeta`,
        `${payload.rows.length} ops · ${formatMs(summary.hostMs)} in ops`
      )
    );
    this.node.replaceChildren(
      title,
      renderSummary(summary, null),
      renderTable(payload.rows, this._sort, key => {
        this._sort = nextSort(this._sort, key);
        this._draw();
      })
    );
  }

  private _mimeType: string;
  private _payload: ITimingsPayload | null = null;
  private _sort: ISortState = DEFAULT_SORT;
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
