import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import * as path from 'node:path';

/** Whether process `pid` exists (signal 0 checks without signalling; EPERM means it exists under another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the folders `<parent>/<prefix><pid>-*` that this user owns and whose process `pid` no longer runs: what a
 * process killed with SIGKILL left behind (stored MP4s, stage-link files in /dev/shm). A folder of a live process, of
 * another user, or of another name is kept; one that cannot be removed is skipped.
 * @returns the folders removed.
 */
export function sweepStaleDirs(parent: string, prefix: string): string[] {
  const uid = process.getuid?.();
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = name.startsWith(prefix) ? /^(\d+)-/.exec(name.slice(prefix.length)) : null;
    if (m === null) continue;
    const dir = path.join(parent, name);
    try {
      const st = statSync(dir);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || alive(Number(m[1]))) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // gone already, or not ours to remove
    }
  }
  return removed;
}

/**
 * Creates a temporary folder `<parent>/<prefix><pid>-XXXXXX` owned by this process, after sweeping the stale folders of
 * the same prefix (see {@link sweepStaleDirs}), so a process killed before its cleanup ran leaves nothing for long.
 * @returns the new folder's path.
 * @throws the fs error when the folder cannot be created.
 */
export function ownedTempDir(parent: string, prefix: string): string {
  sweepStaleDirs(parent, prefix);
  return mkdtempSync(path.join(parent, `${prefix}${process.pid}-`));
}
