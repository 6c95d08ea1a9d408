/**
 * UI tests of the Kernel timings panel, status item and MIME renderer.
 *
 * The notebooks run the real kernel side: `%load_ext workbench`, then
 * `%%wb_profile` cells and `%wb_profile auto on`. Real timings are CPU-only
 * and vary between runs, so exact totals, bar widths and the device filter
 * are checked on a crafted payload with `cuda:0` rows, displayed by
 * ../workbench_ui_helpers.py (`emit_timings()`, uploaded next to that test's
 * notebook); the saved-notebook test writes its payloads into the file.
 */
import {
  expect,
  galata,
  IJupyterLabPageFixture,
  test
} from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';
import * as path from 'path';

const HELPERS = 'workbench_ui_helpers.py';
const SHOTS = path.resolve(__dirname, '..', 'test-results', 'screenshots');
const MIME = 'application/vnd.workbench.timings+json';

const LOAD = 'import workbench as wb\n%load_ext workbench';
// Real ops with distinct call counts: matmul 1, relu 2, sum 3. No indented
// blocks: the editor auto-indents what setCell types.
const PROFILED = [
  '%%wb_profile',
  'x = wb.randn(64, 64)',
  'y = x @ x',
  'r = [y.relu() for _ in range(2)]',
  's = [y.sum() for _ in range(3)]'
].join('\n');
const REAL_OPS = ['matmul', 'relu', 'sum'];

// Ops of the helper's crafted payload, by total time (the payload's order).
const OPS_BY_TOTAL = [
  'matmul',
  'conv2d',
  'to_device',
  'softmax_last_dim',
  'add',
  'reshape'
];
const OPS_BY_CALLS = [
  'add',
  'reshape',
  'matmul',
  'softmax_last_dim',
  'conv2d',
  'to_device'
];

const TRACKER = '@jupyterlab/notebook-extension:tracker';

// JupyterLab records execute_input/execute_reply timestamps only with recordTiming.
test.use({
  mockSettings: {
    ...galata.DEFAULT_SETTINGS,
    [TRACKER]: {
      ...((galata.DEFAULT_SETTINGS as Record<string, any>)[TRACKER] ?? {}),
      recordTiming: true
    }
  }
});

function panel(page: IJupyterLabPageFixture): Locator {
  return page.locator('#jp-workbench-timings');
}

function sections(page: IJupyterLabPageFixture): Locator {
  return panel(page).locator('.jp-WorkbenchTimings-cell');
}

function opNames(scope: Locator): Locator {
  return scope.locator('td[data-column="name"] .jp-WorkbenchTimings-opName');
}

/** The op names shown in `scope`, sorted (real timings have no fixed order). */
async function sortedOpNames(scope: Locator): Promise<string[]> {
  return (await opNames(scope).allTextContents()).sort();
}

async function openPanel(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('workbench-timings:open')
  );
  await expect(panel(page)).toBeVisible();
}

/** The id of the cell at `index` in the current notebook. */
async function cellId(
  page: IJupyterLabPageFixture,
  index: number
): Promise<string> {
  return page.evaluate(
    i =>
      (window as any).jupyterapp.shell.currentWidget.content.widgets[i].model
        .id,
    index
  );
}

async function shot(target: IJupyterLabPageFixture | Locator, name: string) {
  await target.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

test('a %%wb_profile cell fills the panel, the status bar and its output', async ({
  page,
  tmpPath
}) => {
  await page.notebook.createNew('profiled.ipynb');
  await page.notebook.setCell(0, 'code', LOAD);
  await page.notebook.runCell(0, true);
  await page.notebook.addCell('code', PROFILED);
  await page.notebook.runCell(1, true);
  await openPanel(page);

  const id = await cellId(page, 1);
  const section = sections(page);
  await expect(section).toHaveCount(1);
  await expect(section).toHaveAttribute('data-cell-id', id);
  await expect(section).toHaveAttribute('data-source', 'output');
  const names = opNames(section);
  await expect.poll(() => sortedOpNames(section)).toEqual(REAL_OPS);
  await expect(section.locator('.jp-WorkbenchTimings-prompt')).toHaveText(
    '[2]'
  );

  // Per-cell totals: 6 op calls on the CPU, so no device time.
  const summary = section.locator('.jp-WorkbenchTimings-summary');
  await expect(summary.locator('[data-stat="calls"]')).toHaveText('calls6');
  await expect(summary.locator('[data-stat="host"]')).toHaveText(
    /^ops[\d.]+ (µs|ms)$/
  );
  await expect(summary.locator('[data-stat="device"]')).toHaveText('device–');
  await expect(summary.locator('[data-stat="wall"]')).toHaveText(
    /^wall[\d.]+ (µs|ms|s)$/
  );
  await expect(summary.locator('[data-stat="lab"]')).toBeVisible();

  // Status bar: the last cell's host op time (no device time) and op count.
  const status = page.locator('#jp-workbench-timings-status');
  await expect(status).toHaveText(/^[\d.]+ (µs|ms) · 6 ops$/);

  // The cell's outputs: the printed table, then the MIME output drawn inline.
  const cell = (await page.notebook.getCellLocator(1))!;
  await expect(cell.locator('.jp-OutputArea-output').first()).toContainText(
    'matmul'
  );
  const inline = cell.locator('.jp-WorkbenchTimings-output');
  await expect(inline.locator('tbody tr')).toHaveCount(REAL_OPS.length);
  await expect.poll(() => sortedOpNames(inline)).toEqual(REAL_OPS);

  await shot(page, 'panel-light');

  // A narrow sidebar hides mean and device time; a wide one shows every column.
  const mean = section.locator('th[data-sort-key="mean_ms"]');
  await expect(mean).toBeHidden();
  await page.sidebar.setWidth(620, 'right');
  await expect(mean).toBeVisible();
  // No device timing on the CPU: no device column either.
  await expect(section.locator('th[data-sort-key="device_ms"]')).toHaveCount(0);
  await shot(page, 'panel-light-wide');

  // Sorting: a new numeric column sorts descending, a second click flips it.
  const calls = section.locator('th[data-sort-key="calls"]');
  await calls.locator('button').click();
  await expect(calls).toHaveAttribute('aria-sort', 'descending');
  await expect(names).toHaveText(['sum', 'relu', 'matmul']);
  await calls.locator('button').click();
  await expect(calls).toHaveAttribute('aria-sort', 'ascending');
  await expect(names).toHaveText(['matmul', 'relu', 'sum']);
  await section.locator('th[data-sort-key="name"] button').click();
  await expect(names).toHaveText(REAL_OPS);

  // Only CPU rows: the device filter offers cpu, and keeps every row.
  const filter = panel(page).locator('select.jp-WorkbenchTimings-deviceFilter');
  await filter.selectOption('cpu');
  await expect(names).toHaveText(REAL_OPS);
  await filter.selectOption('');

  await page.theme.setDarkTheme();
  await shot(page, 'panel-dark');
  await page.theme.setLightTheme();

  // Reopening the saved notebook repopulates the panel from its outputs.
  await page.notebook.save();
  await page.notebook.close();
  await expect(sections(page)).toHaveCount(0);
  await page.notebook.openByPath(`${tmpPath}/profiled.ipynb`);
  await expect(sections(page)).toHaveCount(1);
  await expect(sections(page)).toHaveAttribute('data-cell-id', id);
  await expect.poll(() => sortedOpNames(sections(page))).toEqual(REAL_OPS);

  // Clear empties the panel and hides the status item.
  await panel(page).locator('button.jp-WorkbenchTimings-clear').click();
  await expect(sections(page)).toHaveCount(0);
  await expect(panel(page).locator('.jp-WorkbenchTimings-empty')).toContainText(
    'No timings yet'
  );
  await expect(status).toBeHidden();
});

test('a crafted payload: exact totals, bars and the device filter', async ({
  page,
  tmpPath
}) => {
  await page.contents.uploadFile(
    path.resolve(__dirname, '..', HELPERS),
    `${tmpPath}/${HELPERS}`
  );
  await page.notebook.createNew('crafted.ipynb');
  await page.notebook.setCell(
    0,
    'code',
    'import workbench_ui_helpers as wbh\npayload = wbh.emit_timings()\nprint(payload["cell_id"])'
  );
  await page.notebook.runCell(0, true);
  await openPanel(page);

  const id = await cellId(page, 0);
  const section = sections(page);
  await expect(section).toHaveCount(1);
  await expect(section).toHaveAttribute('data-cell-id', id);
  const names = opNames(section);
  await expect(names).toHaveText(OPS_BY_TOTAL);
  await expect(section.locator('.jp-WorkbenchTimings-prompt')).toHaveText(
    '[1]'
  );
  // The kernel knew the cell id: IPython got JupyterLab's cellId.
  await expect(page.locator('.jp-OutputArea-output pre').first()).toHaveText(
    id
  );

  const summary = section.locator('.jp-WorkbenchTimings-summary');
  await expect(summary.locator('[data-stat="calls"]')).toHaveText('calls95');
  await expect(summary.locator('[data-stat="host"]')).toHaveText('ops38.9 ms');
  await expect(summary.locator('[data-stat="device"]')).toHaveText(
    'device25.9 ms'
  );
  await expect(summary.locator('[data-stat="wall"]')).toHaveText('wall48.6 ms');

  // Inline bars are as wide as each op's share of the cell.
  const firstBar = section
    .locator('tbody tr')
    .first()
    .locator('.jp-WorkbenchTimings-barFill');
  await expect(firstBar).toHaveAttribute('style', /width: 46\.\d%/);

  // A wide sidebar shows the device column of a payload with device times.
  await page.sidebar.setWidth(620, 'right');
  await expect(section.locator('th[data-sort-key="device_ms"]')).toBeVisible();

  // Status bar: the device time when there is one.
  await expect(page.locator('#jp-workbench-timings-status')).toHaveText(
    '25.9 ms · 95 ops'
  );

  // Sorting by calls: ties (matmul and softmax_last_dim) keep the payload order.
  const calls = section.locator('th[data-sort-key="calls"]');
  await calls.locator('button').click();
  await expect(names).toHaveText(OPS_BY_CALLS);
  await calls.locator('button').click();
  await expect(names).toHaveText([
    'to_device',
    'conv2d',
    'matmul',
    'softmax_last_dim',
    'reshape',
    'add'
  ]);

  // Filter by device.
  const filter = panel(page).locator('select.jp-WorkbenchTimings-deviceFilter');
  await filter.selectOption('cpu');
  await expect(names).toHaveText(['to_device', 'reshape', 'add']);
  await expect(summary.locator('[data-stat="device"]')).toHaveText('device–');
  await shot(panel(page), 'panel-filtered-cpu');
  await filter.selectOption('cuda:0');
  await expect(names).toHaveText(['conv2d', 'matmul', 'softmax_last_dim']);
  await filter.selectOption('');
  await expect(names).toHaveCount(OPS_BY_TOTAL.length);
});

/** A saved notebook: timings in cells 1 and 41, a bad payload in cell 3. */
function savedNotebook(): string {
  const payload = (cellId: string, count: number, scale: number) => ({
    version: 1,
    cell_id: cellId,
    execution_count: count,
    wall_ms: 30 * scale,
    totals: { calls: 7, host_ms: 20 * scale, device_ms: null },
    rows: [
      {
        name: 'matmul',
        device: 'cpu',
        calls: 2,
        total_ms: 15 * scale,
        self_ms: 15 * scale,
        mean_ms: 7.5 * scale,
        device_ms: null,
        share: 0.75
      },
      {
        name: 'relu',
        device: 'cpu',
        calls: 5,
        total_ms: 5 * scale,
        self_ms: 5 * scale,
        mean_ms: 1 * scale,
        device_ms: null,
        share: 0.25
      }
    ]
  });
  const code = (
    id: string,
    count: number | null,
    outputs: unknown[],
    metadata = {}
  ) => ({
    cell_type: 'code',
    id,
    execution_count: count,
    metadata,
    outputs,
    source: 'x = 1'
  });
  const display = (data: unknown) => ({
    output_type: 'display_data',
    metadata: {},
    data: { [MIME]: data, 'text/plain': '<workbench timings>' }
  });
  const filler = Array.from({ length: 37 }, (_, i) => ({
    cell_type: 'markdown',
    id: `filler-${i}`,
    metadata: {},
    source: `Filler paragraph ${i}: the profiled cell is far below.`
  }));
  const notebook = {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    cells: [
      {
        cell_type: 'markdown',
        id: 'title',
        metadata: {},
        source: '# Saved timings'
      },
      code('cell-a', 1, [display(payload('cell-a', 1, 1))], {
        execution: {
          'iopub.execute_input': '2024-05-01T10:00:00.000Z',
          'shell.execute_reply': '2024-05-01T10:00:02.000Z'
        }
      }),
      code('cell-b', 2, []),
      code('cell-c', 3, [display({ ...payload('cell-c', 3, 1), version: 2 })]),
      ...filler,
      code('cell-z', 4, [display(payload('cell-z', 4, 3))])
    ]
  };
  return JSON.stringify(notebook);
}

test('a saved notebook repopulates the panel and a section click scrolls to its cell', async ({
  page,
  tmpPath
}) => {
  const warnings: string[] = [];
  page.on('console', message => {
    if (
      message.type() === 'warning' &&
      message.text().includes('[jupyterlab-workbench]')
    ) {
      warnings.push(message.text());
    }
  });
  await page.contents.uploadContent(
    savedNotebook(),
    'text',
    `${tmpPath}/saved.ipynb`
  );
  await page.notebook.openByPath(`${tmpPath}/saved.ipynb`);
  await openPanel(page);

  // Notebook order; the version-2 payload is left out.
  await expect(sections(page)).toHaveCount(2);
  await expect(sections(page).nth(0)).toHaveAttribute('data-cell-id', 'cell-a');
  await expect(sections(page).nth(1)).toHaveAttribute('data-cell-id', 'cell-z');
  await expect(
    sections(page).nth(0).locator('.jp-WorkbenchTimings-cellName')
  ).toHaveText('cell 2');
  await expect(
    sections(page).nth(1).locator('.jp-WorkbenchTimings-cellName')
  ).toHaveText('cell 42');
  // Wall time from the saved execution metadata, beside the kernel's own.
  await expect(sections(page).nth(0).locator('[data-stat="lab"]')).toHaveText(
    'lab2.00 s'
  );
  await expect(sections(page).nth(0).locator('[data-stat="wall"]')).toHaveText(
    'wall30.0 ms'
  );
  // The status bar shows the last cell read.
  await expect(page.locator('#jp-workbench-timings-status')).toHaveText(
    '60.0 ms · 7 ops'
  );

  // The bad payload is reported inline and on the console, never thrown.
  await expect(
    page.locator('.jp-WorkbenchTimings-invalid').first()
  ).toContainText('unsupported version 2');
  expect(warnings.some(w => w.includes('unsupported version 2'))).toBe(true);
  await shot(page, 'saved-notebook');

  // Clicking the section of the last cell scrolls the notebook to it.
  const last = 41;
  await expect
    .poll(() =>
      page.evaluate(
        () =>
          (window as any).jupyterapp.shell.currentWidget.content.activeCellIndex
      )
    )
    .not.toBe(last);
  await sections(page)
    .nth(1)
    .locator('.jp-WorkbenchTimings-cellHeader')
    .click();
  await expect
    .poll(() =>
      page.evaluate(
        () =>
          (window as any).jupyterapp.shell.currentWidget.content.activeCellIndex
      )
    )
    .toBe(last);
  const active = page.locator(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active'
  );
  await expect(active).toBeInViewport();
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook')
  ).toHaveClass(/jp-mod-commandMode/);
  await expect(active.locator('.jp-WorkbenchTimings-output')).toBeVisible();
  await shot(page, 'scrolled-to-cell');
});

test.describe('auto mode', () => {
  // Galata's kernel tracking answers POST /api/kernels/<id>/restart with 201,
  // which JupyterLab rejects as a failed restart: let the restart reach the server.
  test.use({ kernels: null });

  test('shows cells profiled over the comm, across restarts and notebooks', async ({
    page
  }) => {
    await page.notebook.createNew('auto.ipynb');
    await openPanel(page);
    const badge = panel(page).locator('.jp-WorkbenchTimings-auto');
    const name = panel(page).locator('.jp-WorkbenchTimings-notebook');
    const status = page.locator('#jp-workbench-timings-status');
    await expect(name).toHaveText('auto.ipynb');
    // A kernel without workbench: the open failed quietly.
    await expect(badge).toHaveAttribute('data-state', 'unavailable');

    const AUTO_ON = `${LOAD}\n%wb_profile auto on`;
    await page.notebook.setCell(0, 'code', AUTO_ON);
    await page.notebook.runCell(0, true);
    // Retried after that cell, now %load_ext has registered the target.
    await expect(badge).toHaveAttribute('data-state', 'connected');
    // The cell that turns auto mode on is not profiled.
    await expect(sections(page)).toHaveCount(0);

    await page.notebook.addCell(
      'code',
      'x = wb.randn(64, 64)\ny = (x @ x).relu().sum()'
    );
    await page.notebook.runCell(1, true);
    const first = panel(page).locator(
      `[data-cell-id="${await cellId(page, 1)}"]`
    );
    await expect(first).toHaveAttribute('data-source', 'comm');
    await expect(first.locator('tbody tr')).toHaveCount(REAL_OPS.length);
    await expect.poll(() => sortedOpNames(first)).toEqual(REAL_OPS);
    await expect(first.locator('.jp-WorkbenchTimings-tag')).toHaveText('auto');
    await expect(first.locator('.jp-WorkbenchTimings-prompt')).toHaveText(
      '[2]'
    );
    await expect(sections(page)).toHaveCount(1);
    // Nothing was added to the notebook.
    const cell = (await page.notebook.getCellLocator(1))!;
    await expect(cell.locator('.jp-OutputArea-output')).toHaveCount(0);
    await expect(status).toHaveText(/^[\d.]+ (µs|ms) · 3 ops$/);
    await shot(page, 'auto-mode');

    // A restart keeps the timings; the fresh kernel has no target until
    // `%load_ext workbench` and `%wb_profile auto on` run again.
    await page.evaluate(() =>
      (
        window as any
      ).jupyterapp.shell.currentWidget.sessionContext.restartKernel()
    );
    await expect(badge).toHaveAttribute('data-state', 'unavailable');
    await expect(sections(page)).toHaveCount(1);
    await page.notebook.runCell(0, true);
    await expect(badge).toHaveAttribute('data-state', 'connected');
    await page.notebook.addCell(
      'code',
      'z = [wb.randn(8, 8).relu() for _ in range(4)]'
    );
    await page.notebook.runCell(2, true);
    await expect(sections(page)).toHaveCount(2);
    const second = sections(page).nth(1);
    await expect(second).toHaveAttribute('data-cell-id', await cellId(page, 2));
    await expect(second).toHaveAttribute('data-source', 'comm');
    await expect(opNames(second)).toHaveText(['relu']);
    await expect(second.locator('.jp-WorkbenchTimings-prompt')).toHaveText(
      '[2]'
    );
    await expect(status).toHaveText(/^[\d.]+ (µs|ms) · 4 ops$/);
    await shot(page, 'auto-mode-after-restart');

    // Each notebook has its own timings.
    await page.notebook.createNew('other.ipynb');
    await expect(name).toHaveText('other.ipynb');
    await expect(sections(page)).toHaveCount(0);
    await page.notebook.activate('auto.ipynb');
    await expect(name).toHaveText('auto.ipynb');
    await expect(sections(page)).toHaveCount(2);
  });
});
