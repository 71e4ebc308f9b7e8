/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testTimeout: 120000,
  // werift 0.25.2 leaves a few UDP sockets of closed RTCPeerConnections bound (docs/webrtc.md, "Known issues"),
  // which would keep the in-band test process alive after the last suite; exit once every suite has finished.
  forceExit: true,
};
