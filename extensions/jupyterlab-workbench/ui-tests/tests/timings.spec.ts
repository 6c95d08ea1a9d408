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
import * as fs from 'fs';
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

  // Status bar: the last cell's host op time (no device time) and op count,
  // with a tooltip that says what the numbers are.
  const status = page.locator('#jp-workbench-timings-status');
  await expect(status).toHaveText(/^[\d.]+ (µs|ms) · 6 ops$/);
  await expect(status).toHaveAttribute(
    'title',
    /^Last profiled cell \[2\]: .* of host op time, 6 op calls in 3 distinct ops/
  );

  // One output: the rendered view; the text table is only its plain-text
  // fallback, never printed beside it.
  const cell = (await page.notebook.getCellLocator(1))!;
  await expect(cell.locator('.jp-OutputArea-output')).toHaveCount(1);
  await expect(cell.locator('.jp-OutputArea-output pre')).toHaveCount(0);
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

/** A notebook of `cells` on the python3 kernel: it opens without a kernel dialog. */
function notebookJson(cells: unknown[]): string {
  return JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    cells
  });
}

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
  return notebookJson([
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
  ]);
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

  // Card headers stay on one line in the narrow sidebar ("cell 42" unsplit):
  // the name is no taller than the prompt beside it.
  const heights = await sections(page)
    .nth(1)
    .locator('.jp-WorkbenchTimings-cellHeader')
    .evaluate(header => {
      const height = (name: string) =>
        header
          .querySelector(`.jp-WorkbenchTimings-${name}`)!
          .getBoundingClientRect().height;
      return [height('cellName'), height('prompt')];
    });
  expect(heights[0]).toBeGreaterThan(0);
  expect(heights[0]).toBeLessThanOrEqual(heights[1] + 2);

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

test('%%wb_profile -n shows that many rows first, the panel keeps them all', async ({
  page
}) => {
  // Many kernel round trips: on 2 loaded cores this runs past the default 120 s.
  test.slow();
  await page.notebook.createNew('rows.ipynb');
  await page.notebook.setCell(0, 'code', LOAD);
  await page.notebook.runCell(0, true);
  await page.notebook.addCell(
    'code',
    PROFILED.replace('%%wb_profile', '%%wb_profile -n 2 --sort calls')
  );
  await page.notebook.runCell(1, true);
  const cell = (await page.notebook.getCellLocator(1))!;
  const inline = cell.locator('.jp-WorkbenchTimings-output');
  // The text table's rows: the two most called ops, most called first.
  await expect(opNames(inline)).toHaveText(['sum', 'relu']);
  await expect(inline.locator('.jp-WorkbenchTimings-outputMeta')).toHaveText(
    /^2 of 3 ops · /
  );
  await expect(inline.locator('th[data-sort-key="calls"]')).toHaveAttribute(
    'aria-sort',
    'descending'
  );
  await shot(cell, 'output-rows-2');
  await openPanel(page);
  await expect.poll(() => sortedOpNames(sections(page))).toEqual(REAL_OPS);
  await inline.locator('button.jp-WorkbenchTimings-showAll').click();
  await expect(opNames(inline)).toHaveText(['sum', 'relu', 'matmul']);
});

test('a committed tutorial is saved back byte for byte once its kernel is up', async ({
  page,
  request,
  tmpPath
}) => {
  // Opening a tutorial used to dirty git: JupyterLab rewrote the kernelspec,
  // language_info and integral floats. Committed in its form, a save after
  // the kernel connected writes the same bytes.
  test.slow();
  const name = '04_profiling_and_widgets.ipynb';
  const committed = fs.readFileSync(
    path.resolve(__dirname, '..', '..', '..', '..', 'notebooks', name),
    'utf-8'
  );
  await page.contents.uploadContent(committed, 'text', `${tmpPath}/${name}`);
  await page.notebook.openByPath(`${tmpPath}/${name}`);
  await page.evaluate(async () => {
    const widget = (window as any).jupyterapp.shell.currentWidget;
    await widget.sessionContext.ready;
    await widget.sessionContext.session.kernel.info;
  });
  await page.notebook.save();
  const response = await request.get(
    `/api/contents/${tmpPath}/${name}?content=1&type=file&format=text`
  );
  expect(response.ok()).toBe(true);
  const saved = (await response.json()).content as string;
  expect(saved).toBe(committed);
});

test.describe('auto mode', () => {
  // Galata's kernel tracking answers POST /api/kernels/<id>/restart with 201,
  // which JupyterLab rejects as a failed restart: let the restart reach the server.
  test.use({ kernels: null });

  // Without Galata's kernel tracking nothing shuts this test's kernels down,
  // and the next test's page then never finishes loading: do it here.
  test.afterEach(async ({ page }) => {
    await page.evaluate(() =>
      (window as any).jupyterapp.serviceManager.sessions.shutdownAll()
    );
  });

  test('shows cells profiled over the comm, across restarts and notebooks', async ({
    page,
    tmpPath
  }) => {
    // Many kernel round trips: on 2 loaded cores this runs past the default 120 s.
    test.slow();
    await page.notebook.createNew('auto.ipynb');
    await openPanel(page);
    const badge = panel(page).locator('.jp-WorkbenchTimings-auto');
    const name = panel(page).locator('.jp-WorkbenchTimings-notebook');
    const status = page.locator('#jp-workbench-timings-status');
    await expect(name).toHaveText('auto.ipynb');
    // A kernel without workbench: the open failed quietly.
    await expect(badge).toHaveAttribute('data-state', 'unavailable');

    await expect(badge).toHaveText('not loaded');
    const AUTO_ON = `${LOAD}\n%wb_profile auto on`;
    await page.notebook.setCell(0, 'code', AUTO_ON);
    await page.notebook.runCell(0, true);
    // Connected (the kernel opened the comm when auto mode went on), and the
    // badge says auto mode is on.
    await expect(badge).toHaveAttribute('data-state', 'connected');
    await expect(badge).toHaveAttribute('data-auto', 'on');
    await expect(badge).toHaveText('auto: on');
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

    // A restart keeps the timings, marked as the old kernel's; the fresh
    // kernel has no target until `%load_ext workbench` and
    // `%wb_profile auto on` run again.
    await page.evaluate(() =>
      (
        window as any
      ).jupyterapp.shell.currentWidget.sessionContext.restartKernel()
    );
    await expect(badge).toHaveAttribute('data-state', 'unavailable');
    await expect(badge).toHaveAttribute('data-auto', 'unknown');
    await expect(sections(page)).toHaveCount(1);
    await expect(first).toHaveAttribute('data-stale', 'true');
    await expect(first.locator('.jp-WorkbenchTimings-staleTag')).toHaveText(
      'old kernel'
    );
    await shot(page, 'auto-mode-stale-after-restart');
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
    // The new kernel's cell is fresh; the cell not run again stays marked.
    await expect(second).not.toHaveAttribute('data-stale', 'true');
    await expect(first).toHaveAttribute('data-stale', 'true');
    await shot(page, 'auto-mode-after-restart');

    // `%wb_profile auto off`: the badge follows, while the comm stays open.
    await page.notebook.addCell('code', '%wb_profile auto off');
    await page.notebook.runCell(3, true);
    await expect(badge).toHaveAttribute('data-auto', 'off');
    await expect(badge).toHaveText('auto: off');
    await expect(badge).toHaveAttribute('data-state', 'connected');
    await shot(panel(page), 'badge-auto-off');
    await page.notebook.addCell('code', 'q = wb.randn(4, 4).relu()');
    await page.notebook.runCell(4, true);
    await expect(sections(page)).toHaveCount(2); // not profiled any more

    // Each notebook has its own timings. The second one is opened from a file:
    // on a loaded CI host, Galata's createNew once hung for the whole test's
    // time in its click on the New Notebook dialog's Select button.
    const only = {
      cell_type: 'code',
      id: 'only',
      execution_count: null,
      metadata: {},
      outputs: [],
      source: 'x = 1'
    };
    await page.contents.uploadContent(
      notebookJson([only]),
      'text',
      `${tmpPath}/other.ipynb`
    );
    await page.notebook.openByPath(`${tmpPath}/other.ipynb`);
    await expect(name).toHaveText('other.ipynb');
    await expect(sections(page)).toHaveCount(0);
    await page.notebook.activate('auto.ipynb');
    await expect(name).toHaveText('auto.ipynb');
    await expect(sections(page)).toHaveCount(2);
    // A rename shows at once, and the timings stay with the notebook.
    await page.evaluate(
      ([from, to]) =>
        (window as any).jupyterapp.serviceManager.contents.rename(from, to),
      [`${tmpPath}/auto.ipynb`, `${tmpPath}/renamed.ipynb`]
    );
    await expect(name).toHaveText('renamed.ipynb');
    await expect(sections(page)).toHaveCount(2);
  });

  test('Run All and Restart & Run All deliver every auto-profiled cell', async ({
    page
  }) => {
    // Many kernel round trips: on 2 loaded cores this runs past the default 120 s.
    test.slow();
    await page.notebook.createNew('run-all.ipynb');
    await openPanel(page);
    const badge = panel(page).locator('.jp-WorkbenchTimings-auto');
    await page.notebook.setCell(0, 'code', `${LOAD}\n%wb_profile auto on`);
    await page.notebook.addCell('code', 'a = wb.randn(32, 32).relu()');
    await page.notebook.addCell(
      'code',
      'b = [wb.randn(8, 8).sum() for _ in range(3)]'
    );
    const ids = [await cellId(page, 1), await cellId(page, 2)];

    // Run All queues every cell at once: the frontend's own comm open would
    // wait behind them; the kernel opens the comm when auto mode goes on.
    await page.notebook.run();
    await expect(sections(page)).toHaveCount(2);
    for (const [i, id] of ids.entries()) {
      const section = sections(page).nth(i);
      await expect(section).toHaveAttribute('data-cell-id', id);
      await expect(section).toHaveAttribute('data-source', 'comm');
      await expect(section.locator('.jp-WorkbenchTimings-prompt')).toHaveText(
        `[${i + 2}]`
      );
    }
    await expect(opNames(sections(page).nth(0))).toHaveText(['relu']);
    await expect(opNames(sections(page).nth(1))).toHaveText(['sum']);
    await expect(badge).toHaveAttribute('data-auto', 'on');
    await shot(page, 'run-all');

    // Restart & Run All: the old entries are marked, then replaced.
    await page.evaluate(() =>
      (
        window as any
      ).jupyterapp.shell.currentWidget.sessionContext.restartKernel()
    );
    await expect(panel(page).locator('[data-stale="true"]')).toHaveCount(2);
    await page.notebook.run();
    await expect(badge).toHaveAttribute('data-auto', 'on');
    await expect(panel(page).locator('[data-stale="true"]')).toHaveCount(0);
    await expect(sections(page)).toHaveCount(2);
    for (const [i, id] of ids.entries()) {
      await expect(sections(page).nth(i)).toHaveAttribute('data-cell-id', id);
    }
    await shot(page, 'restart-run-all');
  });
});
