/** Jest globalTeardown: removes the run's temporary root made by global-setup.js (same process, so its environment). */
const { rmSync } = require('node:fs');

module.exports = () => {
  const root = process.env.OMNIRX_TEST_TMP_ROOT;
  if (root) rmSync(root, { recursive: true, force: true });
};
