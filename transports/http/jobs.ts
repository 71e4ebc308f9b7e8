import { ReplaySubject, type Observable, type Subscription } from 'rxjs';
import { encodeMp4 } from '../../src/media/mp4';
import type { ErrorEvent, OmniEvent } from '../../src/request/omni-event';
import type { Logger } from '../../src/util/logger';
import type { ServerMetrics } from '../shared/metrics';
import { Mp4Store, type Mp4StoreLimits } from './mp4-store';
import { publicEvent, type PublicEvent } from './public-event';

/** Lifecycle of a video job as the OpenAI API names it. */
export type JobStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

/** Events kept per job for late SSE subscribers (a job has at most maxSteps + a dozen events). */
const MAX_HISTORY = 1024;

/** The values a job actually runs with, echoed in the job object (null until the engine admits the job). */
export interface UsedParams {
  width: number | null;
  height: number | null;
  num_frames: number | null;
  fps: number | null;
  num_inference_steps: number | null;
  guidance_scale: number | null;
  /** [start, end) fractions of the denoise steps that ran guidance. */
  guidance_interval: [number, number] | null;
  flow_shift: number | null;
  sampler: string | null;
  /** Share of fresh noise in each Euler step's re-noising (0: deterministic). */
  eta: number | null;
  seed: number | null;
}

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

/** One video job: its state, its public event history (replayed to late subscribers) and its engine subscription. */
export class VideoJob {
  status: JobStatus = 'queued';
  progress = 0;
  completedAt: number | null = null;
  error: { code: string; message: string } | null = null;
  completedSteps = 0;
  readonly createdAt = nowSeconds();
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
  ) {
    this.done = new Promise((resolve) => (this.markDone = resolve));
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
}

/**
 * The server's video jobs (insertion order = creation order). A job subscribes to the engine's event stream,
 * tracks status and progress from it, encodes the final video to an MP4 in an {@link Mp4Store}, and republishes
 * every event in its public form. Finished jobs are kept up to `maxFinishedJobs` records and the store's bounds;
 * beyond them the oldest finished jobs are forgotten (record and MP4 together). Cancelling a job
 * ({@link cancel}) unsubscribes it — the engine stops it at its next step boundary — and forgets it at once.
 */
export class JobTable {
  private readonly jobs = new Map<string, VideoJob>();
  readonly store: Mp4Store;

  constructor(private readonly options: JobTableOptions) {
    this.store = new Mp4Store(options.store, (id) => this.jobs.delete(id));
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

  /** Removes every stored MP4 and the store's folder. */
  dispose(): void {
    this.store.dispose();
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
    this.options.metrics.jobsEnded.inc({ status: 'completed' });
    this.options.log.info({ jobId: job.id, ms: Math.round(ev.output.ms), bytes: this.store.get(job.id)?.bytes ?? null }, 'job completed');
    job.events.next(publicEvent(ev));
    job.end();
    await this.trimFinished();
  }

  private fail(job: VideoJob, error: { code: string; message: string }, event: PublicEvent): void {
    job.status = 'failed';
    job.error = error;
    job.completedAt = nowSeconds();
    this.options.metrics.failures.inc({ code: error.code });
    this.options.metrics.jobsEnded.inc({ status: 'failed' });
    this.options.log.warn({ jobId: job.id, code: error.code, message: error.message, completedSteps: job.completedSteps }, 'job failed');
    job.events.next(event);
    job.end();
    void this.trimFinished();
  }

  /** Forgets the oldest finished jobs past `maxFinishedJobs`. */
  private async trimFinished(): Promise<void> {
    const finished = [...this.jobs.values()].filter((j) => !j.active);
    for (const job of finished.slice(0, Math.max(0, finished.length - this.options.maxFinishedJobs))) {
      this.jobs.delete(job.id);
      await this.store.remove(job.id);
    }
  }
}
