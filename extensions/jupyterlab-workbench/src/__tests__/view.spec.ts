import { ITimingRow } from '../model';
import { describeRow, renderSummary, renderTable } from '../view';

const rows: ITimingRow[] = [
  {
    name: 'matmul',
    device: 'cpu',
    calls: 3,
    total_ms: 4,
    self_ms: 3.5,
    mean_ms: 1.33,
    device_ms: null,
    share: 0.5
  },
  {
    name: 'add',
    device: 'cpu',
    calls: 37,
    total_ms: 2.6,
    self_ms: 2.6,
    mean_ms: 0.07,
    device_ms: null,
    share: 0.25
  }
];

const texts = (nodes: NodeListOf<Element>) =>
  Array.from(nodes).map(n => n.textContent);

describe('renderTable', () => {
  it('draws a row per op in the sort order with share bars', () => {
    const table = renderTable(rows, { key: 'calls', descending: true });
    expect(
      texts(
        table.querySelectorAll(
          'td[data-column="name"] .jp-WorkbenchTimings-opName'
        )
      )
    ).toEqual(['add', 'matmul']);
    const fills = table.querySelectorAll<HTMLElement>(
      '.jp-WorkbenchTimings-barFill'
    );
    expect(Array.from(fills).map(f => f.style.width)).toEqual([
      '25.0%',
      '50.0%'
    ]);
    expect(
      table.querySelector('th[aria-sort="descending"]')?.textContent
    ).toContain('Calls');
  });

  it('shows the device-time column only when some op has one', () => {
    const header = (t: HTMLTableElement) => texts(t.querySelectorAll('th'));
    expect(
      header(renderTable(rows, { key: 'total_ms', descending: true }))
    ).not.toContain('Device time');
    const timed = [{ ...rows[0], device: 'cuda:0', device_ms: 1.2 }, rows[1]];
    const table = renderTable(timed, { key: 'total_ms', descending: true });
    expect(header(table).some(h => h?.startsWith('Device time'))).toBe(true);
    expect(
      texts(table.querySelectorAll('td[data-column="device_ms"]'))
    ).toEqual(['1.20 ms', '–']);
  });

  it('reports header clicks', () => {
    const onSort = jest.fn();
    const table = renderTable(
      rows,
      { key: 'total_ms', descending: true },
      onSort
    );
    table
      .querySelector<HTMLButtonElement>('th[data-sort-key="mean_ms"] button')!
      .click();
    expect(onSort).toHaveBeenCalledWith('mean_ms');
  });
});

describe('renderSummary', () => {
  it('shows the lab wall time only when recorded', () => {
    const summary = {
      ops: 2,
      calls: 40,
      hostMs: 6.1,
      deviceMs: null,
      kernelWallMs: 12.5
    };
    const without = renderSummary(summary, null);
    expect(without.querySelector('[data-stat="lab"]')).toBeNull();
    expect(without.querySelector('[data-stat="wall"]')?.textContent).toBe(
      'wall12.5 ms'
    );
    const withLab = renderSummary(summary, 15);
    expect(withLab.querySelector('[data-stat="lab"]')?.textContent).toBe(
      'lab15.0 ms'
    );
    expect(withLab.querySelectorAll('.jp-WorkbenchTimings-bar')).toHaveLength(
      1
    );
  });
});

describe('describeRow', () => {
  it('says everything a hidden column would', () => {
    expect(describeRow({ ...rows[0], device: 'cuda:0', device_ms: 1.2 })).toBe(
      'matmul on cuda:0: 3 calls, 4.00 ms total (3.50 ms self), 1.33 ms mean, ' +
        "1.20 ms on the device, 50.0 % of the cell's op time"
    );
  });
});
