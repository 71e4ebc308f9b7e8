/**
 * The run's temporary root (test/setup/global-setup.js): test workers see it as os.tmpdir(), and the processes they
 * spawn inherit it, so what tests write under the temporary directory goes where teardown removes it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

describe('temporary root of a test run', () => {
  it('is os.tmpdir() in the workers: an omnirx-test-* directory that exists', () => {
    expect(path.basename(os.tmpdir())).toMatch(/^omnirx-test-/);
    expect(process.env.OMNIRX_TEST_TMP_ROOT).toBe(os.tmpdir());
    expect(existsSync(os.tmpdir())).toBe(true);
  });

  it('is inherited by spawned processes', () => {
    const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(require("node:os").tmpdir())'], { encoding: 'utf8' });
    expect(r.stdout).toBe(os.tmpdir());
  });
});
