import Database from 'better-sqlite3';
import { OmniError } from '../../src/errors';
import { DB_FILE, openDataDir, type DataDir } from './data-dir';
import type { JobStatus, UsedParams } from './job-types';
import type { PublicEvent } from './public-event';

/** Schema version this build writes (SQLite `user_version`); a newer one is refused, an older one migrated. */
export const JOB_SCHEMA_VERSION = 1;

/** What the job database keeps of one video job. */
export interface JobRow {
  id: string;
  model: string;
  prompt: string;
  status: JobStatus;
  progress: number;
  params: UsedParams;
  /** The `POST /v1/videos` body as submitted (form fields coerced), so a job still queued can run after a restart. */
  request: unknown;
  error: { code: string; message: string } | null;
  createdAt: number;
  completedAt: number | null;
  /** The stored MP4 (file name in `videos/`, bytes) of a completed job. */
  mp4: { file: string; bytes: number } | null;
  /** The job's last public event (`final` or `error`), replayed to SSE subscribers after a restart. */
  lastEvent: PublicEvent | null;
}

/** Version 0 → 1: the jobs table. `seq` keeps creation order (an upsert keeps a row's seq). */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE jobs (
     seq INTEGER PRIMARY KEY,
     id TEXT NOT NULL UNIQUE,
     model TEXT NOT NULL,
     prompt TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'failed')),
     progress INTEGER NOT NULL,
     params TEXT NOT NULL,
     request TEXT,
     error_code TEXT,
     error_message TEXT,
     created_at INTEGER NOT NULL,
     completed_at INTEGER,
     mp4_file TEXT,
     mp4_bytes INTEGER,
     last_event TEXT
   )`,
];

interface RawRow {
  id: string;
  model: string;
  prompt: string;
  status: JobStatus;
  progress: number;
  params: string;
  request: string | null;
  error_code: string | null;
  error_message: string | null;
  created_at: number;
  completed_at: number | null;
  mp4_file: string | null;
  mp4_bytes: number | null;
  last_event: string | null;
}

const dbError = (what: string, err?: unknown) =>
  new OmniError(
    'OMNIRX_ERR_CONFIG',
    `${DB_FILE} in the data folder (dataDir) ${what}${err === undefined ? '' : `: ${(err as Error).message}`}; move it away to start with no jobs`,
    { param: 'dataDir', ...(err === undefined ? {} : { cause: err }) },
  );

/**
 * The durable half of a server's video jobs: one row per job in `<dataDir>/jobs.sqlite` (SQLite through
 * better-sqlite3, WAL journal, `synchronous=NORMAL`: a committed write survives the process dying; a power cut may
 * lose the last few), next to the finished MP4s in `<dataDir>/videos/`. Writes happen on state changes only — created,
 * admitted, completed, failed, forgotten — never per denoise step (progress is saved with those). Synchronous on
 * purpose: each write is one small row.
 */
export class JobStore {
  private readonly db: Database.Database;
  private readonly upsert: Database.Statement;
  private readonly del: Database.Statement;
  private closed = false;

  private constructor(
    readonly dataDir: DataDir,
    db: Database.Database,
  ) {
    this.db = db;
    const cols = 'id, model, prompt, status, progress, params, request, error_code, error_message, created_at, completed_at, mp4_file, mp4_bytes, last_event';
    const vals = cols
      .split(', ')
      .map((c) => `@${c}`)
      .join(', ');
    const updates = cols
      .split(', ')
      .filter((c) => c !== 'id')
      .map((c) => `${c} = excluded.${c}`)
      .join(', ');
    this.upsert = db.prepare(`INSERT INTO jobs (${cols}) VALUES (${vals}) ON CONFLICT(id) DO UPDATE SET ${updates}`);
    this.del = db.prepare('DELETE FROM jobs WHERE id = ?');
  }

  /**
   * Opens (or creates) the job store of data folder `dir` (see `openDataDir`: the folder is locked for this server
   * until {@link close}) and migrates its schema to {@link JOB_SCHEMA_VERSION}.
   * @throws OmniError OMNIRX_ERR_CONFIG (`param` "dataDir") for an unusable folder, a folder locked by another server,
   *   a `jobs.sqlite` that is not a SQLite database (or not ours), or one written by a newer omnirx.
   */
  static open(dir: string): JobStore {
    const dataDir = openDataDir(dir);
    let db: Database.Database | undefined;
    try {
      try {
        db = new Database(dataDir.dbPath);
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = NORMAL');
      } catch (err) {
        throw dbError('cannot be opened as a SQLite database', err);
      }
      migrate(db);
      return new JobStore(dataDir, db);
    } catch (err) {
      db?.close();
      dataDir.release();
      throw err;
    }
  }

  /** Every job row, in creation order. Rows that cannot be parsed are skipped and named in `skipped`. */
  load(): { rows: JobRow[]; skipped: string[] } {
    const rows: JobRow[] = [];
    const skipped: string[] = [];
    for (const r of this.db.prepare('SELECT * FROM jobs ORDER BY seq').all() as RawRow[]) {
      try {
        rows.push({
          id: r.id,
          model: r.model,
          prompt: r.prompt,
          status: r.status,
          progress: r.progress,
          params: JSON.parse(r.params) as UsedParams,
          request: r.request === null ? null : (JSON.parse(r.request) as unknown),
          error: r.error_code === null ? null : { code: r.error_code, message: r.error_message ?? '' },
          createdAt: r.created_at,
          completedAt: r.completed_at,
          mp4: r.mp4_file === null || r.mp4_bytes === null ? null : { file: r.mp4_file, bytes: r.mp4_bytes },
          lastEvent: r.last_event === null ? null : (JSON.parse(r.last_event) as PublicEvent),
        });
      } catch {
        skipped.push(String(r.id).slice(0, 128));
      }
    }
    return { rows, skipped };
  }

  /** Writes `row` (insert, or update of the row with its id). */
  save(row: JobRow): void {
    if (this.closed) return;
    this.upsert.run({
      id: row.id,
      model: row.model,
      prompt: row.prompt,
      status: row.status,
      progress: row.progress,
      params: JSON.stringify(row.params),
      request: row.request === null || row.request === undefined ? null : JSON.stringify(row.request),
      error_code: row.error?.code ?? null,
      error_message: row.error?.message ?? null,
      created_at: row.createdAt,
      completed_at: row.completedAt,
      mp4_file: row.mp4?.file ?? null,
      mp4_bytes: row.mp4?.bytes ?? null,
      last_event: row.lastEvent === null ? null : JSON.stringify(row.lastEvent),
    });
  }

  /** Deletes the row of `id` (no-op when absent). */
  remove(id: string): void {
    if (this.closed) return;
    this.del.run(id);
  }

  /** Closes the database and releases the data folder's lock (once). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
    this.dataDir.release();
  }
}

/** Brings `db` to {@link JOB_SCHEMA_VERSION}, refusing a database that is not ours or is newer. */
function migrate(db: Database.Database): void {
  let version: number;
  let tables: string[];
  try {
    version = db.pragma('user_version', { simple: true }) as number;
    tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name);
  } catch (err) {
    throw dbError('is not a readable SQLite database', err);
  }
  if (version > JOB_SCHEMA_VERSION) {
    throw dbError(`was written by a newer omnirx (job schema version ${version}; this one reads up to ${JOB_SCHEMA_VERSION})`);
  }
  if (version === 0 && tables.length > 0) throw dbError(`is a SQLite database of something else (tables: ${tables.slice(0, 5).join(', ')})`);
  if (version > 0 && !tables.includes('jobs')) throw dbError('has no jobs table');
  db.transaction(() => {
    for (let v = version; v < JOB_SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${JOB_SCHEMA_VERSION}`);
  })();
}

/**
 * The durable store `createServer` opens for its options: none without `dataDir` (jobs live in memory).
 * @throws OmniError OMNIRX_ERR_CONFIG (`param` "jobRetentionSeconds") for a retention that is not a positive
 *   integer of at most ten years; see {@link JobStore.open} for `dataDir`.
 */
export function openJobStore(options: { dataDir?: string; jobRetentionSeconds?: number }): JobStore | undefined {
  const r = options.jobRetentionSeconds;
  if (r !== undefined && (!Number.isInteger(r) || r < 1 || r > 10 * 365 * 86400)) {
    throw new OmniError('OMNIRX_ERR_CONFIG', `jobRetentionSeconds must be an integer of seconds in [1, 315360000]; got ${String(r)}`, {
      param: 'jobRetentionSeconds',
    });
  }
  return options.dataDir === undefined ? undefined : JobStore.open(options.dataDir);
}
