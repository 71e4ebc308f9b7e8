/**
 * `npm test` (plain `jest`) runs the fast tests: every test file not listed in SLOW — unit, parity, operators, engine,
 * transports in process. `npm run test:all` (OMNIRX_TEST_ALL=1) runs SLOW as well: the training CLI and PyTorch
 * tests, Chromium, stage processes (tests that fork dist/src/placement/stage-main.js) and the shipped model's quality.
 * Tests stay where they are; a new test is fast by default. To mark one slow, add its path (or its folder, ending in
 * '/') to SLOW below. One slow test alone: `OMNIRX_TEST_ALL=1 npx jest <path>` (or `npm run test:all -- <path>`).
 */
const SLOW = [
  // the training recipe's commands and modules, run with Debian's /usr/bin/python3 and PyTorch
  'test/tools/',
  // Chromium, driven by playwright-core
  'test/transports/ws/browser.test.ts',
  'test/transports/webrtc/browser.test.ts',
  'test/transports/webrtc/turn-browser.test.ts',
  'test/transports/http/cors-browser.test.ts',
  // stage processes (dist/src/placement/stage-main.js over shm or tcp)
  'test/placement/stage-processes.test.ts',
  'test/placement/stage-session.test.ts',
  'test/placement/stage-supervision.test.ts',
  'test/placement/topology-deployment.test.ts',
  'test/contract/executors-processes.test.ts',
  'test/families/toy-image-stage-processes.test.ts',
  // every README and docs snippet, compiled strict as a user project and run (the openai client job, the server)
  'test/docs/',
  // the shipped model's quality
  'test/quality/',
  'test/eval/eval-world-cli.test.ts',
];

const all = process.env.OMNIRX_TEST_ALL === '1';
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  // examples/ holds a marble test of its own, shown to users as how to test an operator
  roots: ['<rootDir>/test', '<rootDir>/examples'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', ...(all ? [] : SLOW.map((p) => `<rootDir>/${escape(p)}`))],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // The package's public entry points, as code outside it imports them (examples, the test-only family), resolved to
  // the sources; compiled code resolves them through package.json's `exports`.
  moduleNameMapper: {
    '^omnirx$': '<rootDir>/src/index.ts',
    '^omnirx/operators$': '<rootDir>/operators/index.ts',
    '^omnirx/pipeline$': '<rootDir>/src/pipeline/index.ts',
    '^omnirx/families$': '<rootDir>/src/families/index.ts',
    '^omnirx/families/wan$': '<rootDir>/src/families/wan/index.ts',
    '^omnirx/server$': '<rootDir>/transports/server.ts',
    // light-my-request (Fastify's inject) requires `cookie`, an ES module Jest cannot require on Node 20
    '^cookie$': '<rootDir>/test/helpers/cookie-stub.js',
  },
  testTimeout: 120000,
  // one temporary root per run, removed at its end, on SIGINT/SIGTERM/SIGHUP, or by the next run if its jest was killed
  globalSetup: '<rootDir>/test/setup/global-setup.js',
  globalTeardown: '<rootDir>/test/setup/global-teardown.js',
};
