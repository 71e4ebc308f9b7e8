import { readdirSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { ReplaySubject, type Observable, type Subscription } from 'rxjs';
import { encodeMp4 } from '../../src/media/mp4';
import type { ErrorEvent, OmniEvent } from '../../src/request/omni-event';
import type { Logger } from '../../src/util/logger';
import type { ServerMetrics } from '../shared/metrics';
import type { JobRow, JobStore } from './job-store';
import type { JobStatus, UsedParams } from './job-types';
import { Mp4Store, type Mp4StoreLimits } from './mp4-store';
import { publicEvent, type PublicEvent } from './public-event';

export type { JobStatus, UsedParams } from './job-types';

/** Events kept per job for late SSE subscribers (a job has at most maxSteps + a dozen events). */
const MAX_HISTORY = 1024;

/** The job object of `GET /v1/videos/{id}`: OpenAI's `Video` plus the values actually used. */
export interface VideoObject extends Omit<UsedParams, 'width' | 'height'> {
  id: string;
  object: 'video';
  model: string;
  status: JobStatus;
  progress: number;
  created_at: number;
  completed_at: number | null;
  expires_at: null;
  prompt: string;
  remixed_from_video_id: null;
  size: string | null;
  seconds: string | null;
  error: { code: string; message: string } | null;
}

/** First decisive outcome of a new job (see {@link JobTable.start}). */
export type StartOutcome = { kind: 'admitted' | 'queued' } | { kind: 'rejected'; error: ErrorEvent };

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Ids the routes give jobs (`video_` + 32 hex digits); a stored row with another id is not trusted as a file name. */
const JOB_ID = /^video_[0-9a-f]{32}$/;

/** Code and message of a job that was running when its server stopped (at close, or found so at the next start). */
const INTERRUPTED = { code: 'OMNIRX_ERR_INTERRUPTED', message: 'the server stopped while the job ran; create the job again' };

/** One video job: its state, its public event history (replayed to late subscribers) and its engine subscription. */
export class VideoJob {
  status: JobStatus = 'queued';
  progress = 0;
  completedAt: number | null = null;
  error: { code: string; message: string } | null = null;
  completedSteps = 0;
  readonly createdAt: number;
  /** The `POST /v1/videos` body as submitted (kept by a durable table so a queued job can run after a restart). */
  readonly request: unknown;
  /** The last public event (`final` or `error`) once the job ended. */
  lastEvent: PublicEvent | null = null;
  readonly events = new ReplaySubject<PublicEvent>(MAX_HISTORY);
  readonly params: UsedParams = {
    width: null,
    height: null,
    num_frames: null,
    fps: null,
    num_inference_steps: null,
    guidance_scale: null,
    guidance_interval: null,
    flow_shift: null,
    sampler: null,
    eta: null,
    seed: null,
  };
  /** Resolves when the job ended (completed, failed or cancelled). */
  readonly done: Promise<void>;
  subscription: Subscription | undefined;
  readonly encodeAbort = new AbortController();
  private markDone!: () => void;

  constructor(
    readonly id: string,
    readonly model: string,
    readonly prompt: string,
    init: { createdAt?: number; request?: unknown } = {},
  ) {
    this.createdAt = init.createdAt ?? nowSeconds();
    this.request = init.request ?? null;
    this.done = new Promise((resolve) => (this.markDone = resolve));
  }

  /**
   * A job as a durable table stored it. A finished job's event history is its last event alone, and has ended; a
   * queued one waits to be run again ({@link JobTable.resume}).
   */
  static fromRow(row: JobRow): VideoJob {
    const job = new VideoJob(row.id, row.model, row.prompt, { createdAt: row.createdAt, request: row.request });
    Object.assign(job.params, row.params);
    job.status = row.status;
    job.progress = row.progress;
    job.error = row.error;
    job.completedAt = row.completedAt;
    job.lastEvent = row.lastEvent;
    if (!job.active) {
      if (row.lastEvent !== null) job.events.next(row.lastEvent);
      job.end();
    }
    return job;
  }

  /** Whether the job still runs (or waits) in the engine or the encoder. */
  get active(): boolean {
    return this.status === 'queued' || this.status === 'in_progress';
  }

  /** Ends the event history (SSE streams close) and settles {@link done}. */
  end(): void {
    this.events.complete();
    this.markDone();
  }

  /** The job object (OpenAI `Video` shape plus the values used). */
  toJSON(): VideoObject {
    const { width, height, ...used } = this.params;
    const p = this.params;
    return {
      id: this.id,
      object: 'video',
      model: this.model,
      status: this.status,
      progress: this.progress,
      created_at: this.createdAt,
      completed_at: this.completedAt,
      expires_at: null,
      prompt: this.prompt,
      remixed_from_video_id: null,
      size: width !== null && height !== null ? `${width}x${height}` : null,
      seconds: p.num_frames !== null && p.fps !== null ? String(Math.round((p.num_frames / p.fps) * 1000) / 1000) : null,
      error: this.error,
      ...used,
    };
  }
}

/** Options of a {@link JobTable}. */
export interface JobTableOptions {
  /** Bounds of the finished MP4s kept on disk (see {@link Mp4Store}). */
  store: Mp4StoreLimits;
  /** Most finished (completed or failed) job records kept; the oldest finished are forgotten first. */
  maxFinishedJobs: number;
  /** Resolves the ffmpeg binary (called per encode; memoise it). */
  ffmpegPath: () => Promise<string>;
  metrics: ServerMetrics;
  /** Where each job's lifecycle is logged: refused, admitted, completed, cancelled (`info`), failed (`warn`). */
  log: Logger;
  /**
   * The durable store (a data folder): jobs and MP4s outlive the server. Absent: jobs live in memory and the MP4s in a
   * private temporary folder, both gone when the server closes.
   */
  durable?: JobStore;
  /** Finished jobs are forgotten (record and MP4) this many seconds after they finished. Default: kept until a bound. */
  retentionSeconds?: number;
}

/**
 * The server's video jobs (insertion order = creation order). A job subscribes to the engine's event stream,
 * tracks status and progress from it, encodes the final video to an MP4 in an {@link Mp4Store}, and republishes
 * every event in its public form. Finished jobs are kept up to `maxFinishedJobs` records, the store's bounds and
 * `retentionSeconds`; beyond them the oldest finished jobs are forgotten (record and MP4 together). Cancelling a job
 * ({@link cancel}) unsubscribes it — the engine stops it at its next step boundary — and forgets it at once.
 *
 * With a `durable` store every state change (created, admitted, completed, failed, forgotten) is written to it, and
 * the table starts from what it holds: finished jobs as they were, jobs that were running `failed` with
 * `OMNIRX_ERR_INTERRUPTED`, queued jobs queued again ({@link toResume}).
 */
export class JobTable {
  private readonly jobs = new Map<string, VideoJob>();
  readonly store: Mp4Store;
  private readonly expiry: NodeJS.Timeout | undefined;

  constructor(private readonly options: JobTableOptions) {
    this.store = new Mp4Store(
      options.store,
      (id) => {
        this.jobs.delete(id);
        options.durable?.remove(id);
      },
      options.durable?.dataDir.videosDir,
    );
    if (options.durable !== undefined) this.restore(options.durable);
    const retention = options.retentionSeconds;
    if (retention !== undefined) {
      this.expiry = setInterval(() => void this.expire(), Math.min(60_000, Math.max(1000, retention * 500)));
      this.expiry.unref();
    }
  }

  /** Whether jobs outlive the server (a data folder). */
  get durable(): boolean {
    return this.options.durable !== undefined;
  }

  /** The job `id`, if the table holds it. */
  get(id: string): VideoJob | undefined {
    return this.jobs.get(id);
  }

  /** Every job, newest first. */
  list(): VideoJob[] {
    return [...this.jobs.values()].reverse();
  }

  /** Jobs still queued or running. */
  active(): VideoJob[] {
    return [...this.jobs.values()].filter((j) => j.active);
  }

  /**
   * Adds `job` and subscribes to `events$` (the engine's stream for it). Resolves at the first decisive event:
   * `admitted`; an `error` before admission (`rejected`: the job is removed again, the caller answers with the
   * error); or, when neither came within `admitWaitMs` (the job waits in the engine queue), `queued`.
   */
  start(job: VideoJob, events$: Observable<OmniEvent>, admitWaitMs: number): Promise<StartOutcome> {
    this.jobs.set(job.id, job);
    this.persist(job);
    return new Promise<StartOutcome>((resolve) => {
      let decided = false;
      const decide = (o: StartOutcome) => {
        if (decided) return;
        decided = true;
        clearTimeout(timer);
        resolve(o);
      };
      const timer = setTimeout(() => decide({ kind: 'queued' }), admitWaitMs);
      job.subscription = events$.subscribe({
        next: (ev) => {
          if (ev.type === 'error' && job.status === 'queued' && !decided) {
            this.options.log.info({ jobId: job.id, code: ev.code }, 'job refused');
            this.jobs.delete(job.id);
            this.options.durable?.remove(job.id);
            job.end();
            decide({ kind: 'rejected', error: ev });
            return;
          }
          this.onEvent(job, ev);
          if (ev.type === 'admitted') decide({ kind: 'admitted' });
        },
      });
    });
  }

  /** Queued jobs kept from an earlier run that wait to be submitted again ({@link resume}), oldest first. */
  toResume(): VideoJob[] {
    return [...this.jobs.values()].filter((j) => j.status === 'queued' && j.subscription === undefined && !j.encodeAbort.signal.aborted);
  }

  /** Runs a queued job kept from an earlier run: subscribes to `events$`; an error, even before admission, fails it. */
  resume(job: VideoJob, events$: Observable<OmniEvent>): void {
    this.options.log.info({ jobId: job.id }, 'job resumed');
    job.subscription = events$.subscribe({ next: (ev) => this.onEvent(job, ev) });
  }

  /** Fails a queued job kept from an earlier run that cannot be submitted again (its model is gone, its body no longer valid). */
  failQueued(job: VideoJob, error: { code: string; message: string }): void {
    if (job.status !== 'queued') return;
    this.fail(job, error, { type: 'error', requestId: job.id, ...error, completedSteps: 0 });
  }

  /**
   * Cancels `id` if it is active (unsubscribe: the engine stops at the next step boundary; an MP4 encode in
   * progress is killed) and removes the job and its MP4. Subscribers of its events get a final `cancelled` event.
   * Returns false when no such job exists.
   */
  async cancel(id: string): Promise<boolean> {
    const job = this.jobs.get(id);
    if (job === undefined) return false;
    this.jobs.delete(id);
    if (job.active) {
      job.subscription?.unsubscribe();
      job.encodeAbort.abort();
      job.events.next({ type: 'cancelled', requestId: id, completedSteps: job.completedSteps });
      this.options.metrics.jobsEnded.inc({ status: 'cancelled' });
      this.options.log.info({ jobId: id, completedSteps: job.completedSteps }, 'job cancelled');
      job.end();
    }
    this.options.durable?.remove(id);
    await this.store.remove(id);
    return true;
  }

  /** Fails every active job with `code` (unsubscribing it), e.g. when a drain runs out of time. */
  failActive(code: string, message: string): number {
    const act = this.active();
    for (const job of act) {
      job.subscription?.unsubscribe();
      job.encodeAbort.abort();
      this.fail(job, { code, message }, { type: 'error', requestId: job.id, code, message, completedSteps: job.completedSteps });
    }
    return act.length;
  }

  /**
   * Ends the active jobs when the server stops at `code` (a drain that ran out of time). In memory every active job
   * fails. A durable table fails the running ones and keeps the queued ones queued, to run when a server starts on
   * the same data folder; their SSE streams end without an event.
   * @returns how many failed and how many were kept.
   */
  stopActive(code: string, message: string): { failed: number; kept: number } {
    if (!this.durable) return { failed: this.failActive(code, message), kept: 0 };
    // The queued ones leave the engine first: a running job unsubscribed frees its slot, and the engine would start
    // the next queued job at once.
    const queued = this.active().filter((j) => j.status === 'queued');
    for (const job of queued) {
      job.subscription?.unsubscribe();
      job.encodeAbort.abort();
      job.end();
    }
    const running = this.active().filter((j) => j.status !== 'queued');
    for (const job of running) {
      job.subscription?.unsubscribe();
      job.encodeAbort.abort();
      this.fail(job, { code, message }, { type: 'error', requestId: job.id, code, message, completedSteps: job.completedSteps });
    }
    const [failed, kept] = [running.length, queued.length];
    if (kept > 0) this.options.log.info({ jobs: kept }, 'queued jobs kept for the next start');
    return { failed, kept };
  }

  /**
   * Ends the active jobs as the server closes without a drain: in memory all fail with `OMNIRX_ERR_UNAVAILABLE`; a
   * durable table fails the running ones with `OMNIRX_ERR_INTERRUPTED` and keeps the queued ones (see {@link stopActive}).
   */
  closeActive(): void {
    if (this.durable) this.stopActive(INTERRUPTED.code, INTERRUPTED.message);
    else this.failActive('OMNIRX_ERR_UNAVAILABLE', 'the server closed before the job finished');
  }

  /** Forgets the jobs in memory; removes the temporary MP4 folder, or closes the durable store (its files stay). */
  dispose(): void {
    clearInterval(this.expiry);
    this.store.dispose();
    this.options.durable?.close();
  }

  /** Loads `durable`'s jobs: finished as they were, running → failed (interrupted), queued → to resume; sweeps orphan MP4s. */
  private restore(durable: JobStore): void {
    const { rows, skipped } = durable.load();
    const counts = { completed: 0, failed: 0, interrupted: 0, queued: 0 };
    for (const row of rows) {
      if (!JOB_ID.test(row.id)) {
        skipped.push(row.id.slice(0, 128));
        durable.remove(row.id);
        continue;
      }
      const interrupted = row.status === 'in_progress';
      const job = VideoJob.fromRow(
        interrupted
          ? {
              ...row,
              status: 'failed',
              error: INTERRUPTED,
              completedAt: nowSeconds(),
              lastEvent: { type: 'error', requestId: row.id, ...INTERRUPTED, completedSteps: 0 },
            }
          : row,
      );
      this.jobs.set(job.id, job);
      if (interrupted) {
        counts.interrupted++;
        this.persist(job);
        this.options.log.warn({ jobId: job.id, code: INTERRUPTED.code }, 'job failed: it was running when the server stopped');
      } else {
        counts[row.status as 'completed' | 'failed' | 'queued']++;
        if (row.status === 'completed' && row.mp4 !== null) this.store.restore(job.id, row.mp4.bytes);
      }
    }
    // MP4s no job names: an encode cut off by a crash, or a job forgotten while the server was dying.
    const named = new Set([...this.jobs.keys()].map((id) => Mp4Store.fileName(id)));
    const videosDir = durable.dataDir.videosDir;
    for (const name of readdirSync(videosDir)) {
      if (name.endsWith('.mp4') && !named.has(name)) rmSync(path.join(videosDir, name), { force: true, recursive: true });
    }
    this.options.log.info({ ...counts, skipped: skipped.length === 0 ? undefined : skipped }, 'jobs restored from the data folder');
    void this.store
      .evictPastBounds()
      .then(() => this.trimFinished())
      .catch((err: unknown) => this.options.log.warn({ err }, 'trimming the restored jobs failed'));
  }

  /** Writes `job`'s current state to the durable store, if any. */
  private persist(job: VideoJob): void {
    const durable = this.options.durable;
    if (durable === undefined) return;
    const file = job.status === 'completed' ? this.store.get(job.id) : undefined;
    durable.save({
      id: job.id,
      model: job.model,
      prompt: job.prompt,
      status: job.status,
      progress: job.progress,
      params: job.params,
      request: job.request,
      error: job.error,
      createdAt: job.createdAt,
      completedAt: job.completedAt,
      mp4: file === undefined ? null : { file: Mp4Store.fileName(job.id), bytes: file.bytes },
      lastEvent: job.lastEvent,
    });
  }

  private onEvent(job: VideoJob, ev: OmniEvent): void {
    if (!job.active) return;
    switch (ev.type) {
      case 'admitted': {
        const p = ev.params;
        const num = (k: string) => (typeof p[k] === 'number' ? (p[k] as number) : null);
        const [start, end] = [num('guidanceIntervalStart'), num('guidanceIntervalEnd')];
        Object.assign(job.params, {
          width: num('width'),
          height: num('height'),
          num_frames: num('numFrames'),
          fps: num('fps'),
          num_inference_steps: num('numInferenceSteps'),
          guidance_scale: num('guidanceScale'),
          guidance_interval: start !== null && end !== null ? [start, end] : null,
          flow_shift: num('flowShift'),
          sampler: typeof p.sampler === 'string' ? p.sampler : null,
          eta: num('eta'),
          seed: num('seed'),
        });
        job.status = 'in_progress';
        this.persist(job);
        this.options.log.info({ jobId: job.id, ...job.params }, 'job admitted');
        break;
      }
      case 'step':
        job.completedSteps = ev.index + 1;
        job.progress = Math.min(99, Math.floor((100 * (ev.index + 1)) / ev.total));
        break;
      case 'error':
        this.fail(job, { code: ev.code, message: ev.message }, publicEvent(ev));
        return;
      case 'final':
        // Published once the MP4 is stored, so `final` on the event stream means the content is downloadable.
        void this.finish(job, ev);
        return;
      default:
        break;
    }
    job.events.next(publicEvent(ev));
  }

  private async finish(job: VideoJob, ev: Extract<OmniEvent, { type: 'final' }>): Promise<void> {
    const video = ev.output.artifacts.video;
    try {
      if (video === undefined || video.kind !== 'video') throw new Error('the request finished without a video artifact');
      const { bytes } = await encodeMp4(video, this.store.pathFor(job.id), { ffmpegPath: await this.options.ffmpegPath(), signal: job.encodeAbort.signal });
      if (!job.active) return; // cancelled while encoding
      await this.store.add(job.id, bytes);
    } catch (err) {
      if (!job.active) return;
      const e = err as { code?: unknown; message?: unknown };
      const code = typeof e.code === 'string' ? e.code : 'OMNIRX_ERR_INTERNAL';
      const message = typeof e.message === 'string' ? e.message : String(err);
      this.fail(job, { code, message }, { type: 'error', requestId: job.id, code, message, completedSteps: job.completedSteps });
      return;
    }
    job.status = 'completed';
    job.progress = 100;
    job.completedAt = nowSeconds();
    job.lastEvent = publicEvent(ev);
    this.persist(job);
    this.options.metrics.jobsEnded.inc({ status: 'completed' });
    this.options.log.info({ jobId: job.id, ms: Math.round(ev.output.ms), bytes: this.store.get(job.id)?.bytes ?? null }, 'job completed');
    job.events.next(job.lastEvent);
    job.end();
    await this.trimFinished();
  }

  private fail(job: VideoJob, error: { code: string; message: string }, event: PublicEvent): void {
    job.status = 'failed';
    job.error = error;
    job.completedAt = nowSeconds();
    job.lastEvent = event;
    this.persist(job);
    this.options.log.warn({ jobId: job.id, code: error.code, message: error.message, completedSteps: job.completedSteps }, 'job failed');
    this.options.metrics.failures.inc({ code: error.code });
    this.options.metrics.jobsEnded.inc({ status: 'failed' });
    job.events.next(event);
    job.end();
    void this.trimFinished();
  }

  /** Forgets a finished job: its record (memory and durable store) and its MP4. */
  private async forget(id: string): Promise<void> {
    this.jobs.delete(id);
    this.options.durable?.remove(id);
    await this.store.remove(id);
  }

  /** Forgets the oldest finished jobs past `maxFinishedJobs`, and those past `retentionSeconds`. */
  private async trimFinished(): Promise<void> {
    const finished = [...this.jobs.values()].filter((j) => !j.active);
    for (const job of finished.slice(0, Math.max(0, finished.length - this.options.maxFinishedJobs))) await this.forget(job.id);
    await this.expire();
  }

  /** Forgets the finished jobs that finished more than `retentionSeconds` ago. */
  private async expire(): Promise<void> {
    const retention = this.options.retentionSeconds;
    if (retention === undefined) return;
    const cutoff = nowSeconds() - retention;
    for (const job of [...this.jobs.values()]) {
      if (!job.active && job.completedAt !== null && job.completedAt < cutoff) await this.forget(job.id);
    }
  }
}
