const jestJupyterLab = require('@jupyterlab/testutils/lib/jest-config');

// ES modules that jest must transform (they ship untranspiled `export` syntax).
const esModules = [
  '@codemirror',
  '@jupyter/ydoc',
  '@jupyter/react-components',
  '@jupyter/web-components',
  '@microsoft/fast',
  '@jupyterlab/',
  'exenv-es6',
  'lib0',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs',
  'uplot'
].join('|');

const baseConfig = jestJupyterLab(__dirname);

module.exports = {
  ...baseConfig,
  automock: false,
  collectCoverageFrom: [
    'src/**/*.{ts,tsx}',
    '!src/**/*.d.ts',
    '!src/**/.ipynb_checkpoints/*'
  ],
  coverageReporters: ['lcov', 'text-summary'],
  testRegex: 'src/.*/.*.spec.tsx?$',
  transform: {
    '\\.[jt]sx?$': [
      'ts-jest',
      { tsconfig: 'tsconfig.test.json', isolatedModules: true }
    ]
  },
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
