/**
 * Folders a process killed with SIGKILL leaves behind (stored MP4s, stage-link files) are removed by the next process
 * that makes one of the same kind: `<prefix><pid>-*` of a pid that no longer runs. Live processes' folders, other
 * names and plain files are kept.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ownedTempDir, sweepStaleDirs } from '../../src/util/owned-temp-dir';
import { Mp4Store } from '../../transports/http/mp4-store';

/** The pid of a process that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  const pid = Number(r.stdout);
  expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  return pid;
}

describe('owned temporary folders', () => {
  it('sweepStaleDirs removes the folders of dead processes, and only those', () => {
    const parent = mkdtempSync(path.join(tmpdir(), 'omnirx-sweep-'));
    const dead = deadPid();
    const stale = path.join(parent, `omnirx-x-${dead}-abc`);
    mkdirSync(path.join(stale, 'inner'), { recursive: true });
    writeFileSync(path.join(stale, 'inner', 'f.mp4'), 'data');
    const keep = [`omnirx-x-${process.pid}-live`, 'omnirx-x-test-1', `omnirx-y-${dead}-other`, 'unrelated'];
    for (const k of keep) mkdirSync(path.join(parent, k));
    writeFileSync(path.join(parent, `omnirx-x-${dead}-file`), ''); // a file, not a folder
    expect(sweepStaleDirs(parent, 'omnirx-x-')).toEqual([stale]);
    expect(readdirSync(parent).sort()).toEqual([...keep, `omnirx-x-${dead}-file`].sort());
    expect(sweepStaleDirs(path.join(parent, 'missing'), 'omnirx-x-')).toEqual([]);
  });

  it('ownedTempDir names the folder after this process and sweeps first', () => {
    const parent = mkdtempSync(path.join(tmpdir(), 'omnirx-sweep-'));
    const stale = path.join(parent, `omnirx-x-${deadPid()}-old`);
    mkdirSync(stale);
    const dir = ownedTempDir(parent, 'omnirx-x-');
    expect(path.basename(dir)).toMatch(new RegExp(`^omnirx-x-${process.pid}-`));
    expect(existsSync(stale)).toBe(false);
  });

  it("the HTTP server's MP4 store removes the store a killed server left in the temp folder", () => {
    const stale = path.join(tmpdir(), `omnirx-http-${deadPid()}-killed`);
    mkdirSync(stale);
    writeFileSync(path.join(stale, 'video_1.mp4'), 'mp4 bytes');
    const store = new Mp4Store({ maxFiles: 1, maxBytes: 1 }, () => undefined);
    try {
      expect(existsSync(stale)).toBe(false);
      expect(path.basename(store.dir)).toMatch(new RegExp(`^omnirx-http-${process.pid}-`));
    } finally {
      store.dispose();
    }
  });
});
