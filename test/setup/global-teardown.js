/**
 * Jest globalTeardown: removes the run's temporary root made by global-setup.js (same process, so its environment)
 * and its signal handlers, and restores TMPDIR, so that the next run of `jest --watch` makes its root where the first
 * did. Removes nothing but an `omnirx-test-*` directory.
 */
const { rmSync } = require('node:fs');
const path = require('node:path');

module.exports = () => {
  const root = process.env.OMNIRX_TEST_TMP_ROOT;
  if (root && path.basename(root).startsWith('omnirx-test-')) rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) for (const f of process.listeners(s)) if (f.omnirxTempRoot) process.removeListener(s, f);
  const before = process.env.OMNIRX_TEST_TMPDIR_BEFORE;
  if (before) process.env.TMPDIR = before;
  else delete process.env.TMPDIR;
  delete process.env.OMNIRX_TEST_TMP_ROOT;
  delete process.env.OMNIRX_TEST_TMPDIR_BEFORE;
};
