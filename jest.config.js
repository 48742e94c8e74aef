const jestJupyterLab = require('@jupyterlab/testutils/lib/jest-config');

// ES modules that jest must transform (they ship untranspiled `export` syntax).
const esModules = [
  '@codemirror',
  '@jupyter/ydoc',
  '@jupyter/react-components',
  '@jupyter/web-components',
  '@microsoft',
  '@jupyterlab/',
  'color',
  'exenv-es6',
  'lib0',
  'marked',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

const baseConfig = jestJupyterLab(__dirname);

module.exports = {
  ...baseConfig,
  automock: false,
  collectCoverageFrom: [
    'src/**/*.{ts,tsx}',
    '!src/**/*.d.ts',
    '!src/**/.ipynb_checkpoints/*',
    '!src/__tests__/**'
  ],
  coverageReporters: ['lcov', 'text-summary'],
  reporters: ['default'],
  modulePathIgnorePatterns: [
    '<rootDir>/jupyter_hyperpod/',
    '<rootDir>/ui-tests/',
    '<rootDir>/.venv/'
  ],
  testRegex: 'src/__tests__/.*\\.spec\\.tsx?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
