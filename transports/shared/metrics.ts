import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Live values the gauges read at scrape time. */
export interface MetricSources {
  /** The engine's queue (waiting for admission) and running requests. */
  engineStats: () => { queued: number; running: number };
  /** Video jobs accepted by the server and not yet admitted by the engine. */
  waitingJobs: () => number;
  /** Finished MP4s held by the server, files and bytes. */
  storedVideos: () => { files: number; bytes: number };
}

/**
 * The server's Prometheus metrics in a registry of its own (two servers in one process never share counters).
 * Names: `omnirx_queue_depth`, `omnirx_running`, `omnirx_waiting_jobs`, `omnirx_stored_videos`,
 * `omnirx_stored_video_bytes` (gauges, read at scrape), `omnirx_step_duration_seconds` (histogram of denoise
 * step wall time), `omnirx_http_request_duration_seconds{method,route,status}`, `omnirx_failures_total{code}`,
 * `omnirx_jobs_total{status}` (video jobs that ended: completed / failed / cancelled).
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly stepSeconds: Histogram;
  readonly requestSeconds: Histogram<'method' | 'route' | 'status'>;
  readonly failures: Counter<'code'>;
  readonly jobsEnded: Counter<'status'>;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    gauge('omnirx_queue_depth', 'Requests waiting in the engine queue for admission.', () => sources.engineStats().queued);
    gauge('omnirx_running', 'Requests admitted and running in the engine.', () => sources.engineStats().running);
    gauge('omnirx_waiting_jobs', 'Video jobs accepted by the server and not yet admitted.', sources.waitingJobs);
    gauge('omnirx_stored_videos', 'Finished MP4 files held for download.', () => sources.storedVideos().files);
    gauge('omnirx_stored_video_bytes', 'Bytes of finished MP4 files held for download.', () => sources.storedVideos().bytes);
    this.stepSeconds = new Histogram({
      name: 'omnirx_step_duration_seconds',
      help: 'Wall time of one denoise step, seconds.',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
      registers,
    });
    this.requestSeconds = new Histogram({
      name: 'omnirx_http_request_duration_seconds',
      help: 'HTTP request latency (to the last byte of the response head and body), seconds.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
      registers,
    });
    this.failures = new Counter({ name: 'omnirx_failures_total', help: 'Failed requests and jobs by error code.', labelNames: ['code'], registers });
    this.jobsEnded = new Counter({ name: 'omnirx_jobs_total', help: 'Video jobs that ended, by final status.', labelNames: ['status'], registers });
  }
}
