/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
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
  },
  testTimeout: 120000,
  // one temporary root per run, removed at its end
  globalSetup: '<rootDir>/test/setup/global-setup.js',
  globalTeardown: '<rootDir>/test/setup/global-teardown.js',
};
