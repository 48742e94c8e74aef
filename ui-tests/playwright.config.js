/**
 * Galata (Playwright) configuration: Debian's chromium, no video, one worker, our own port.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.HYPERPOD_UI_PORT || '8917';

module.exports = {
  ...baseConfig,
  timeout: 120 * 1000,
  expect: { timeout: 20 * 1000 },
  // CI: one retry for a browser test that lost a timing race (a real failure fails twice).
  retries: process.env.CI ? 1 : 0,
  workers: 1,
  reporter: [['list']],
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    video: 'off',
    trace: 'off',
    viewport: { width: 1400, height: 850 },
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-quic',
        '--no-first-run'
      ]
    }
  },
  webServer: {
    command: 'jupyter lab --config jupyter_server_test_config.py',
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120 * 1000,
    reuseExistingServer: false
  }
};
