/**
 * The run's temporary root (test/setup/global-setup.js, global-teardown.js): test workers see it as os.tmpdir(), the
 * processes they spawn inherit it, and teardown removes it and restores TMPDIR (checked in a child process that runs
 * setup and teardown twice, as `jest --watch` does).
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

  it.each([
    ['TMPDIR unset', undefined],
    ['TMPDIR set', os.tmpdir()],
  ])('teardown removes the root with what was written in it and restores TMPDIR, twice in one process (%s)', (_what, tmpdirBefore) => {
    const script = `
      const fs = require('node:fs'), path = require('node:path');
      const setup = require(${JSON.stringify(path.join(__dirname, 'global-setup.js'))});
      const teardown = require(${JSON.stringify(path.join(__dirname, 'global-teardown.js'))});
      const out = [];
      for (let i = 0; i < 2; i++) {
        setup();
        const root = process.env.TMPDIR;
        fs.mkdirSync(path.join(root, 'a'));
        fs.writeFileSync(path.join(root, 'a', 'f'), 'x');
        teardown();
        out.push({ root, removed: !fs.existsSync(root), tmpdir: process.env.TMPDIR ?? null });
      }
      process.stdout.write(JSON.stringify(out));`;
    const env = { ...process.env };
    delete env.TMPDIR;
    if (tmpdirBefore !== undefined) env.TMPDIR = tmpdirBefore;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env });
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout) as Array<{ root: string; removed: boolean; tmpdir: string | null }>;
    expect(out).toHaveLength(2);
    for (const o of out) {
      expect(path.basename(o.root)).toMatch(/^omnirx-test-/);
      expect(o.removed).toBe(true);
      expect(o.tmpdir).toBe(tmpdirBefore ?? null);
    }
  });
});
