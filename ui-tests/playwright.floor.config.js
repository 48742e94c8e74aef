/**
 * The smoke journey (tests/smoke.spec.ts) in the oldest JupyterLab the panel supports: the same
 * browser and test server configuration as playwright.config.js, with the server from the floor's
 * virtual environment (floor-venv.sh; run.sh passes its directory in HYPERPOD_FLOOR_VENV).
 */
const path = require('path');
const main = require('./playwright.config');

const port = process.env.HYPERPOD_FLOOR_UI_PORT || '8918';
const venv = process.env.HYPERPOD_FLOOR_VENV;
if (!venv) {
  throw new Error(
    'HYPERPOD_FLOOR_VENV: run ui-tests/run.sh (it makes the floor environment)'
  );
}

module.exports = {
  ...main,
  testMatch: 'smoke.spec.ts',
  use: { ...main.use, baseURL: `http://127.0.0.1:${port}` },
  webServer: {
    ...main.webServer,
    command: `${path.join(venv, 'bin', 'jupyter')} lab --config jupyter_server_test_config.py`,
    url: `http://127.0.0.1:${port}/lab`,
    env: { ...process.env, HYPERPOD_UI_PORT: port }
  }
};
