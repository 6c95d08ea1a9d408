import { expect, test } from '@jupyterlab/galata';
test('debug restart', async ({ page }) => {
  page.on('console', m => console.log('BROWSER', m.type(), m.text().slice(0, 300)));
  await page.notebook.createNew('auto.ipynb');
  await page.evaluate(() => (window as any).jupyterapp.commands.execute('workbench-timings:open'));
  await expect(page.locator('.jp-WorkbenchTimings-auto')).toHaveAttribute('data-state', 'unavailable');
  await page.evaluate(() => {
    const k = (window as any).jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    k.statusChanged.connect((_: any, s: any) => console.log('STATUS', s));
    k.connectionStatusChanged.connect((_: any, s: any) => console.log('CONN', s));
    k.anyMessage.connect((_: any, a: any) => { console.log(a.direction, a.msg.channel, a.msg.header.msg_type, JSON.stringify(a.msg.content).slice(0, 100), a.msg.parent_header?.msg_type); });
  });
  await page.evaluate(() => (window as any).jupyterapp.shell.currentWidget.sessionContext.restartKernel());
  console.log('RESTARTED');
  await expect(page.locator('.jp-WorkbenchTimings-auto')).toHaveAttribute('data-state', 'unavailable', { timeout: 5000 }).catch(() => console.log('STUCK'));
  console.log('STATE', await page.locator('.jp-WorkbenchTimings-auto').getAttribute('data-state'));
});
