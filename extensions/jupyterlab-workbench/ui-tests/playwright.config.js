/**
 * Galata/Playwright configuration for the jupyterlab-workbench UI tests.
 *
 * Runs Debian's Chromium (never `playwright install`), starts its own
 * JupyterLab on a free port with a temporary notebook directory, and keeps
 * screenshots under test-results/.
 */
const { execFileSync } = require('child_process');
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const CHROMIUM = process.env.WB_CHROMIUM || '/usr/bin/chromium';

// The config is loaded by the runner and again by each worker: pick the port
// once and hand it down through the environment.
if (!process.env.WB_UI_PORT) {
  process.env.WB_UI_PORT = execFileSync(process.execPath, [
    '-e',
    "const s = require('net').createServer(); s.listen(0, '127.0.0.1', () => { process.stdout.write(String(s.address().port)); s.close(); });"
  ])
    .toString()
    .trim();
}
const port = process.env.WB_UI_PORT;

module.exports = {
  ...baseConfig,
  reporter: [['list'], ['html', { open: 'never' }]],
  outputDir: 'test-results/artifacts',
  // Two cores: one browser, one server, kernels; tests share the server.
  workers: 1,
  retries: 0,
  timeout: 120000,
  expect: { timeout: 20000 },
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    viewport: { width: 1400, height: 860 },
    video: 'off',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic'
      ]
    }
  },
  webServer: {
    command: 'jupyter lab --config jupyter_server_test_config.py',
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120000,
    reuseExistingServer: false,
    stdout: 'ignore',
    stderr: 'pipe'
  }
};
