const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

const esModules = [
  '@codemirror',
  '@jupyter/ydoc',
  '@jupyterlab/',
  'lib0',
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
  reporters: ['default'],
  // The built labextension copies package.json; ui-tests is its own project.
  modulePathIgnorePatterns: [
    '<rootDir>/jupyterlab_workbench/labextension',
    '<rootDir>/ui-tests'
  ],
  collectCoverageFrom: [
    'src/model.ts',
    'src/format.ts',
    'src/comm.ts',
    'src/view.ts'
  ],
  coverageReporters: ['text-summary'],
  testRegex: 'src/.*/.*.spec.ts[x]?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
