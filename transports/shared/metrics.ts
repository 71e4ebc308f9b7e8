import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { EngineMetrics } from '../../src/engine/engine-metrics';

/** Live values the gauges read at scrape time. */
export interface MetricSources {
  /** Video jobs accepted by the server and not yet admitted by the engine. */
  waitingJobs: () => number;
  /** Finished MP4s held by the server, files and bytes. */
  storedVideos: () => { files: number; bytes: number };
}

/**
 * The server's Prometheus metrics in a registry of its own (two servers in one process never share counters), served
 * at `/metrics` (docs/metrics.md lists every name). It holds the engine's metrics (`engine`: `EngineMetrics`, attached
 * by the server once its engine is up; the queue, memory, cache, native and stage gauges, per-request cost, and
 * `omnirx_step_duration_seconds`), prom-client's default process metrics (`processMetrics()`: resident memory, heap,
 * event-loop lag, GC), and the server's own: `omnirx_waiting_jobs`, `omnirx_stored_videos`,
 * `omnirx_stored_video_bytes` (gauges, read at scrape), `omnirx_http_request_duration_seconds{method,route,status}`,
 * `omnirx_failures_total{code}`, `omnirx_jobs_total{status}` (video jobs that ended: completed / failed / cancelled).
 */
export class ServerMetrics {
  readonly registry = new Registry();
  /** The engine's and the process's metrics, on `registry`. */
  readonly engine: EngineMetrics;
  readonly requestSeconds: Histogram<'method' | 'route' | 'status'>;
  readonly failures: Counter<'code'>;
  readonly jobsEnded: Counter<'status'>;

  constructor(sources: MetricSources) {
    this.engine = new EngineMetrics(undefined, { registry: this.registry });
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
    gauge('omnirx_waiting_jobs', 'Video jobs accepted by the server and not yet admitted.', sources.waitingJobs);
    gauge('omnirx_stored_videos', 'Finished MP4 files held for download.', () => sources.storedVideos().files);
    gauge('omnirx_stored_video_bytes', 'Bytes of finished MP4 files held for download.', () => sources.storedVideos().bytes);
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
