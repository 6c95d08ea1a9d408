/**
 * The extension's icon: three timing bars, themed like JupyterLab's icons.
 */
import { LabIcon } from '@jupyterlab/ui-components';

export const timingsIcon = new LabIcon({
  name: 'jupyterlab-workbench:timings',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<rect x="3" y="4" width="14" height="3" rx="1"/>' +
    '<rect x="3" y="10" width="9" height="3" rx="1"/>' +
    '<rect x="3" y="16" width="18" height="3" rx="1"/>' +
    '</g></svg>'
});
