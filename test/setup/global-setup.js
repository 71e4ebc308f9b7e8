/**
 * Jest globalSetup: every test run gets its own temporary root. A fresh `omnirx-test-*` directory under the system's
 * temporary directory becomes TMPDIR, so `os.tmpdir()` in the test workers (started after this, with its environment)
 * and the ffmpeg and Python processes the tests spawn create their files inside it; global-teardown.js removes it and
 * restores TMPDIR, so a run that ends normally, passing or failing, leaves nothing behind (a run killed before its
 * teardown leaves its root).
 */
const { mkdtempSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

module.exports = () => {
  process.env.OMNIRX_TEST_TMPDIR_BEFORE = process.env.TMPDIR ?? '';
  const root = mkdtempSync(path.join(os.tmpdir(), 'omnirx-test-'));
  process.env.OMNIRX_TEST_TMP_ROOT = root;
  process.env.TMPDIR = root;
};
