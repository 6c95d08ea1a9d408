/**
 * Plugin wiring: the Kernel timings sidebar, the status-bar item, commands,
 * and one NotebookTimings per open notebook. The MIME renderer is registered
 * separately through `jupyterlab.mimeExtension` (renderer.ts).
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Signal } from '@lumino/signaling';

import { timingsIcon } from './icon';
import { NotebookTimings } from './notebook';
import { TimingsPanel } from './panel';
import { TimingsStatus } from './status';

namespace CommandIDs {
  export const open = 'workbench-timings:open';
  export const clear = 'workbench-timings:clear';
}

type Context = NotebookPanel['context'];

function activate(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  restorer: ILayoutRestorer | null,
  statusBar: IStatusBar | null,
  palette: ICommandPalette | null
): void {
  const notebooks = new Map<Context, NotebookTimings>();
  const timingsFor = (panel: NotebookPanel): NotebookTimings => {
    let timings = notebooks.get(panel.context);
    if (!timings) {
      const created = new NotebookTimings(panel);
      notebooks.set(panel.context, created);
      panel.context.disposed.connect(() => {
        notebooks.delete(panel.context);
        if (sidebar.source === created) {
          sidebar.source = null;
        }
        created.dispose();
      });
      timings = created;
    }
    return timings;
  };

  const scrollToCell = async (key: string): Promise<void> => {
    const current = tracker.currentWidget;
    if (!current) {
      return;
    }
    const index = timingsFor(current).cellIndex(key);
    if (index < 0) {
      return;
    }
    app.shell.activateById(current.id);
    const notebook = current.content;
    notebook.activeCellIndex = index;
    await notebook.scrollToCell(notebook.widgets[index], 'center');
    // Command mode, so that a stray key press does not edit the cell.
    notebook.mode = 'command';
  };

  const sidebar = new TimingsPanel({
    onCellClick: key => void scrollToCell(key)
  });
  sidebar.title.icon = timingsIcon;
  app.shell.add(sidebar, 'right', { rank: 650 });
  restorer?.add(sidebar, 'jupyterlab-workbench:timings');

  app.commands.addCommand(CommandIDs.open, {
    label: 'Show Kernel Timings',
    caption: 'Per-op kernel timings of the active notebook',
    icon: timingsIcon,
    execute: () => app.shell.activateById(sidebar.id)
  });
  app.commands.addCommand(CommandIDs.clear, {
    label: 'Clear Kernel Timings',
    caption: 'Forget the kernel timings of the active notebook',
    isEnabled: () => (sidebar.source?.store.size ?? 0) > 0,
    execute: () => sidebar.clear()
  });
  if (palette) {
    for (const command of [CommandIDs.open, CommandIDs.clear]) {
      palette.addItem({ command, category: 'Workbench' });
    }
  }

  const status = new TimingsStatus(() => {
    void app.commands.execute(CommandIDs.open);
  });
  const statusActive = new Signal<unknown, void>(sidebar);
  if (statusBar) {
    statusBar.registerStatusItem('jupyterlab-workbench:status', {
      item: status,
      align: 'left',
      rank: 5,
      isActive: () => tracker.currentWidget !== null,
      activeStateChanged: statusActive
    });
  }

  let shown: NotebookTimings | null = null;
  const showLast = () => status.setCell(shown?.store.last ?? null);
  const follow = () => {
    const current = tracker.currentWidget;
    const timings = current ? timingsFor(current) : null;
    if (shown && !shown.isDisposed) {
      shown.store.changed.disconnect(showLast);
    }
    shown = timings;
    timings?.store.changed.connect(showLast);
    sidebar.source = timings;
    showLast();
    statusActive.emit();
  };

  tracker.widgetAdded.connect((_, panel) => timingsFor(panel));
  tracker.forEach(panel => timingsFor(panel));
  tracker.currentChanged.connect(follow);
  follow();
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-workbench:plugin',
  description: 'Kernel timings panel and status item for workbench.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILayoutRestorer, IStatusBar, ICommandPalette],
  activate
};

export default plugin;
