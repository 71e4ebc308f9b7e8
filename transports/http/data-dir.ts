import { accessSync, closeSync, constants, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import * as path from 'node:path';
import { OmniError } from '../../src/errors';
import { alive } from '../../src/util/owned-temp-dir';

/** Name of the lock file in a data folder: the pid of the server that holds the folder. */
export const LOCK_FILE = 'server.lock';
/** Name of the job database in a data folder. */
export const DB_FILE = 'jobs.sqlite';
/** Name of the folder of finished MP4s in a data folder. */
export const VIDEOS_DIR = 'videos';

/** Lock files this process holds (resolved paths): a lock naming our own pid that is not here is stale. */
const heldHere = new Set<string>();

/** A data folder opened and locked by this server (see {@link openDataDir}). */
export interface DataDir {
  /** The folder, as given. */
  readonly dir: string;
  /** `<dir>/videos`, the finished MP4s. */
  readonly videosDir: string;
  /** `<dir>/jobs.sqlite`, the job database. */
  readonly dbPath: string;
  /** Removes the lock file (once; later calls do nothing). */
  release(): void;
}

const configError = (message: string) => new OmniError('OMNIRX_ERR_CONFIG', message, { param: 'dataDir' });

/**
 * Opens `dir` as a server's data folder: creates it (and `videos/`) when absent, checks that it is a writable folder,
 * and takes its lock, `server.lock`, created exclusively with this process's pid. A lock whose pid no longer runs (a
 * server killed before its close ran), or that names this process without this process holding it (a pid reused
 * after a container restart), is stale and taken over.
 * @throws OmniError OMNIRX_ERR_CONFIG (`param` "dataDir") when `dir` is not a non-empty string, is a file, cannot be
 *   created or written, or is locked by another live server.
 */
export function openDataDir(dir: string): DataDir {
  if (typeof dir !== 'string' || dir.trim() === '') throw configError('dataDir must be a non-empty folder path');
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw configError('the data folder (dataDir) is a file, not a folder');
    throw configError(`the data folder (dataDir) cannot be created: ${code ?? (err as Error).message}`);
  }
  if (!statSync(dir).isDirectory()) throw configError('the data folder (dataDir) is a file, not a folder');
  try {
    accessSync(dir, constants.W_OK | constants.R_OK | constants.X_OK);
  } catch {
    throw configError('the data folder (dataDir) is not writable by this process');
  }
  const lockPath = path.resolve(dir, LOCK_FILE);
  takeLock(lockPath);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    heldHere.delete(lockPath);
    try {
      unlinkSync(lockPath);
    } catch {
      // removed by hand already
    }
  };
  const videosDir = path.join(dir, VIDEOS_DIR);
  try {
    mkdirSync(videosDir, { recursive: true });
    if (!statSync(videosDir).isDirectory()) throw configError(`${VIDEOS_DIR} in the data folder (dataDir) is not a folder`);
  } catch (err) {
    release();
    if (err instanceof OmniError) throw err;
    throw configError(`${VIDEOS_DIR} in the data folder (dataDir) cannot be created: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { dir, videosDir, dbPath: path.join(dir, DB_FILE), release };
}

/** Creates `lockPath` exclusively with our pid, taking over a stale lock once. */
function takeLock(lockPath: string): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(lockPath, 'wx', 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw configError(
          `the lock file ${LOCK_FILE} in the data folder (dataDir) cannot be created: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        );
      }
      const holder = lockHolder(lockPath);
      const live = holder !== undefined && (holder === process.pid ? heldHere.has(lockPath) : alive(holder));
      if (live) {
        throw configError(
          `the data folder (dataDir) is in use by another server (pid ${holder}, ${LOCK_FILE}); one server per data folder — stop it or pick another folder`,
        );
      }
      try {
        unlinkSync(lockPath); // stale: its server is gone
      } catch {
        // removed by someone else in the meantime; the next exclusive create decides
      }
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    heldHere.add(lockPath);
    return;
  }
  throw configError(`the data folder (dataDir) is being taken by another server at the same time (${LOCK_FILE})`);
}

/** The pid written in a lock file, or undefined when it holds none (an empty or garbled file is stale). */
function lockHolder(lockPath: string): number | undefined {
  try {
    const text = readFileSync(lockPath, 'utf8').trim();
    return /^\d{1,10}$/.test(text) ? Number(text) : undefined;
  } catch {
    return undefined;
  }
}
