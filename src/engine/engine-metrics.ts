import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client';
import type { CacheBudgets } from '../cache/budgets';
import type { CacheManagerStats } from '../cache/cache-manager';
import type { ExecutorHealth } from '../executor/executor';
import { loadNative, type NativeBinding, type NativeStats } from '../native/binding';
import type { StageMemory } from '../placement/stage-host';
import type { RequestWatch, RequestWatcher } from './request-watch';

/**
 * What the metrics read of an engine. `Engine` has all of it; a stand-in (a server's test double) may have only
 * `stats` and `health`, and then the request, cache and stage metrics stay empty.
 */
export interface MeteredEngine {
  stats(): { queued: number; running: number; memoryBytes?: number; sessions?: number };
  health(): ExecutorHealth;
  /** The memory budget of admission, bytes. */
  readonly memoryBudgetBytes?: number;
  /** Read for its caches (in process: `caches`) or its stages' memory (stage topologies: `memory()`). */
  readonly executor?: unknown;
  watchRequests?(watcher: RequestWatcher): () => void;
}

export interface EngineMetricsOptions {
  /** The registry to register on (a server's, or your own). Default: a new registry, `metrics.registry`. */
  registry?: Registry;
  /**
   * Also register prom-client's default process metrics (`processMetrics()`: resident memory, heap, event-loop lag,
   * GC, CPU, handles), skipping any name the registry already has. Default true.
   */
  processMetrics?: boolean;
  /** The native addon whose `stats()` the native gauges read. Default: `loadNative()`, loaded at the first scrape. */
  native?: NativeBinding;
  /** How long a scrape waits for the stage processes' memory reports, ms. Default 2000. */
  stageReportTimeoutMs?: number;
}

/** One process's (or the monolithic executor's) contribution to the cache and stage gauges. */
interface StageReport {
  /** `monolithic` (the in-process executor) or the stage role. */
  stage: string;
  caches?: CacheManagerStats & { budgets?: CacheBudgets };
  rssBytes?: number;
  nativeBytesInUse?: number;
}

type StageMemoryReport = StageMemory & { rssBytes?: number; nativeBytesInUse?: number };

const HEALTH_VALUE: Readonly<Record<ExecutorHealth['status'], number>> = { ok: 0, degraded: 1, down: 2 };

let processRegistry: Registry | undefined;

/**
 * prom-client's default metrics (`process_resident_memory_bytes`, `process_cpu_seconds_total`,
 * `nodejs_eventloop_lag_seconds` and its percentiles, `nodejs_heap_size_used_bytes`, `nodejs_gc_duration_seconds`,
 * `nodejs_active_handles`, …) in one registry per process, created on first call. They describe the process, so every
 * `EngineMetrics` and server of the process shares the same metric objects: prom-client's event-loop delay monitor
 * and GC observer cannot be stopped once started, so they are started once (the monitor's timer is unref'd: it never
 * keeps the process alive). The lag percentiles cover the time since the previous scrape of any registry holding them.
 */
export function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * Prometheus metrics of one engine, on a prom-client `Registry`, with no server needed (docs/metrics.md lists every
 * name). Gauges are read from the engine when scraped: the queue (`omnirx_queue_depth`, `omnirx_running`), admitted
 * memory against the admission budget (pool utilization), open world sessions, health, this process's native bytes,
 * the caches (feature cache, chunk-KV slabs; per stage process on a stage topology) and each stage process's resident
 * and native bytes. Per-request cost comes from the engine's own event stream (`Engine.watchRequests`): request
 * duration by task and outcome, queue wait, loop steps per request, step time and errors by code.
 *
 * A scrape never hangs on a stage process that is down or wedged: its memory report is awaited at most
 * `stageReportTimeoutMs`; past that, the stage gauges are left empty for that scrape and
 * `omnirx_stage_report_failures_total` goes up.
 *
 * ## Example
 * ```ts no-run (a fragment: an engine created as in the README)
 * import { EngineMetrics } from 'omnirx';
 * const metrics = new EngineMetrics(engine);
 * // … run requests …
 * console.log(await metrics.registry.metrics()); // Prometheus text format
 * metrics.close();
 * ```
 */
export class EngineMetrics {
  readonly registry: Registry;
  private engine?: MeteredEngine;
  private unwatch?: () => void;
  private native?: NativeBinding;
  private nativeFailed = false;
  private reporting?: Promise<StageReport[]>;
  /** Names of the metrics this instance registered (removed again by `close`). */
  private readonly own: string[] = [];
  private readonly stageReportTimeoutMs: number;

  private readonly requestSeconds: Histogram<'task' | 'outcome'>;
  private readonly queueSeconds: Histogram<'task'>;
  private readonly requestSteps: Histogram<'task'>;
  private readonly stepSeconds: Histogram;
  private readonly errors: Counter<'code'>;
  private readonly stageReportFailures: Counter;

  /**
   * @param engine the engine to meter; leave it out and `attach` one later (a server whose engine starts in the
   *   background). Until then the gauges read 0.
   */
  constructor(engine?: MeteredEngine, options: EngineMetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    this.native = options.native;
    this.stageReportTimeoutMs = options.stageReportTimeoutMs ?? 2000;
    if (options.processMetrics ?? true) {
      for (const m of processMetrics().getMetricsAsArray()) {
        if (this.registry.getSingleMetric(m.name) === undefined) {
          this.registry.registerMetric(m as unknown as Metric);
          this.own.push(m.name);
        }
      }
    }
    this.defineEngineGauges();
    this.defineStageGauges();
    const registers = [this.registry];
    this.requestSeconds = this.keep(
      new Histogram({
        name: 'omnirx_request_duration_seconds',
        help: 'Wall time of a request from queued to its end (final, error or cancel), by task and outcome (completed, failed, cancelled); task is none for one that ended before admission.',
        labelNames: ['task', 'outcome'],
        buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600],
        registers,
      }),
    );
    this.queueSeconds = this.keep(
      new Histogram({
        name: 'omnirx_request_queue_seconds',
        help: 'Wall time a request waited from queued to admitted, by task.',
        labelNames: ['task'],
        buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
        registers,
      }),
    );
    this.requestSteps = this.keep(
      new Histogram({
        name: 'omnirx_request_steps',
        help: 'Loop (denoise) steps an admitted request ran before it ended, by task.',
        labelNames: ['task'],
        buckets: [1, 2, 4, 8, 16, 32, 50, 64, 100, 128],
        registers,
      }),
    );
    this.stepSeconds = this.keep(
      new Histogram({
        name: 'omnirx_step_duration_seconds',
        help: 'Wall time of one denoise step, seconds.',
        buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
        registers,
      }),
    );
    this.errors = this.keep(
      new Counter({
        name: 'omnirx_request_errors_total',
        help: 'Requests that ended with an error event (refusals included), by error code.',
        labelNames: ['code'],
        registers,
      }),
    );
    const reports = () => this.stageReports();
    this.stageReportFailures = this.keep(
      new Counter({
        name: 'omnirx_stage_report_failures_total',
        help: 'Scrapes at which a stage process did not report its memory in time (down, restarting or wedged).',
        registers,
        // Counts this scrape's report too.
        async collect() {
          await reports();
        },
      }),
    );
    if (engine !== undefined) this.attach(engine);
  }

  /** Meters `engine` from now on (replacing the one metered before): its gauges, and the requests it runs from now. */
  attach(engine: MeteredEngine): void {
    this.detach();
    this.engine = engine;
    this.unwatch = engine.watchRequests?.(() => this.watch());
  }

  /** Stops metering the engine: its requests are no longer counted and its gauges read 0. Counts so far stay. */
  detach(): void {
    this.unwatch?.();
    this.unwatch = undefined;
    this.engine = undefined;
  }

  /** Detaches, and removes every metric this instance registered from the registry (a passed-in one keeps the rest). */
  close(): void {
    this.detach();
    for (const name of this.own.splice(0)) this.registry.removeSingleMetric(name);
  }

  private keep<M extends Metric>(m: M): M {
    this.own.push((m as unknown as { name: string }).name);
    return m;
  }

  /** A gauge without labels whose value `read` gives at scrape (left at 0 when it gives undefined). */
  private gauge(name: string, help: string, read: () => number | undefined | Promise<number | undefined>): void {
    this.keep(
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          this.set((await read()) ?? 0);
        },
      }),
    );
  }

  /**
   * A metric labelled by `stage`, set at scrape from each stage report `read` gives a value for (others have none): a
   * gauge, or a counter mirroring a count the stage keeps.
   */
  private stageMetric(kind: 'gauge' | 'counter', name: string, help: string, read: (r: StageReport) => number | undefined): void {
    const reports = () => this.stageReports();
    const config = {
      name,
      help,
      labelNames: ['stage'] as const,
      registers: [this.registry],
      async collect(this: Gauge<'stage'> | Counter<'stage'>) {
        const rs = await reports();
        this.reset();
        for (const r of rs) {
          const v = read(r);
          if (v === undefined) continue;
          if (this instanceof Gauge) this.set({ stage: r.stage }, v);
          else this.inc({ stage: r.stage }, v);
        }
      },
    };
    this.keep(kind === 'gauge' ? new Gauge(config) : new Counter(config));
  }

  private defineEngineGauges(): void {
    const stats = () => this.engine?.stats();
    this.gauge('omnirx_queue_depth', 'Requests waiting in the engine queue for admission.', () => stats()?.queued);
    this.gauge('omnirx_running', 'Requests admitted and running in the engine.', () => stats()?.running);
    this.gauge(
      'omnirx_admitted_memory_bytes',
      'Memory claimed by the running requests (resident + peak), bytes: admission counts it against the budget.',
      () => stats()?.memoryBytes,
    );
    this.gauge(
      'omnirx_admission_budget_bytes',
      "The engine's memory budget for admission, bytes (utilization: omnirx_admitted_memory_bytes / this).",
      () => this.engine?.memoryBudgetBytes,
    );
    this.gauge('omnirx_world_sessions', 'Open interactive world sessions.', () => stats()?.sessions);
    this.gauge('omnirx_engine_health', 'Whether the engine takes work: 0 ok, 1 degraded (a stage process restarting), 2 down (or closed).', () =>
      this.engine === undefined ? undefined : HEALTH_VALUE[this.engine.health().status],
    );
    const native = () => this.nativeStats();
    this.gauge(
      'omnirx_native_bytes_in_use',
      "Native memory held by this process's tensors, packed weights, plan arenas and op scratch, bytes.",
      () => native()?.bytesInUse,
    );
    this.gauge('omnirx_native_buffers', 'Native buffers alive in this process.', () => native()?.buffers);
    this.gauge('omnirx_native_scratch_bytes', "Per-thread kernel scratch of this process's native pool, bytes.", () => native()?.scratchBytes);
  }

  private defineStageGauges(): void {
    const features = (r: StageReport) => r.caches?.features;
    this.stageMetric('gauge', 'omnirx_feature_cache_bytes', 'Bytes held by feature-cache entries (text embeddings), by stage.', (r) => features(r)?.bytes);
    this.stageMetric('gauge', 'omnirx_feature_cache_entries', 'Feature-cache entries resident (in use or freeable), by stage.', (r) => features(r)?.entries);
    this.stageMetric('gauge', 'omnirx_feature_cache_budget_bytes', "The feature cache's byte budget, by stage.", (r) =>
      features(r) === undefined ? undefined : r.caches?.budgets?.featureCacheBytes,
    );
    this.stageMetric('counter', 'omnirx_feature_cache_hits_total', 'Feature-cache lookups that found the entry, by stage.', (r) => features(r)?.hits);
    this.stageMetric('counter', 'omnirx_feature_cache_misses_total', 'Feature-cache lookups that did not, by stage.', (r) => features(r)?.misses);
    this.stageMetric(
      'counter',
      'omnirx_feature_cache_evictions_total',
      'Freeable feature-cache entries evicted to make room, by stage.',
      (r) => features(r)?.evictions,
    );
    const kvBudget = (r: StageReport) => (r.caches?.chunkKv === undefined ? undefined : r.caches.chunkKv.slabs * r.caches.chunkKv.slabBytes);
    this.stageMetric(
      'gauge',
      'omnirx_chunk_kv_bytes_in_use',
      'Chunk-KV slab bytes held by open world sessions, by stage (the pool exists once a session opened).',
      (r) => r.caches?.chunkKv?.usedBytes,
    );
    this.stageMetric('gauge', 'omnirx_chunk_kv_budget_bytes', "The chunk-KV pool's capacity in whole slabs, bytes, by stage.", kvBudget);
    this.stageMetric('gauge', 'omnirx_stage_resident_memory_bytes', 'Resident set size of each stage process, bytes.', (r) => r.rssBytes);
    this.stageMetric('gauge', 'omnirx_stage_native_bytes_in_use', 'Native bytes in use in each stage process.', (r) => r.nativeBytesInUse);
  }

  private nativeStats(): NativeStats | undefined {
    if (this.nativeFailed) return undefined;
    try {
      this.native ??= loadNative();
      return this.native.stats();
    } catch {
      this.nativeFailed = true;
      return undefined;
    }
  }

  /** The cache and stage reports of this scrape: one call shared by every gauge that reads them. */
  private stageReports(): Promise<StageReport[]> {
    this.reporting ??= this.report().finally(() => {
      this.reporting = undefined;
    });
    return this.reporting;
  }

  private async report(): Promise<StageReport[]> {
    const executor = this.engine?.executor as { caches?: unknown; memory?: unknown } | undefined;
    if (executor === undefined || executor === null) return [];
    const caches = executor.caches as { stats(): CacheManagerStats; budgets: CacheBudgets } | undefined;
    if (caches !== undefined && typeof caches.stats === 'function') return [{ stage: 'monolithic', caches: { ...caches.stats(), budgets: caches.budgets } }];
    if (typeof executor.memory !== 'function') return [];
    const memory = executor.memory as () => Promise<Record<string, StageMemoryReport>>;
    let timer: NodeJS.Timeout | undefined;
    try {
      const got = await Promise.race([
        memory.call(executor),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), this.stageReportTimeoutMs);
        }),
      ]);
      if (got === undefined) throw new Error('timed out');
      return Object.entries(got).map(([stage, m]) => ({ stage, caches: m.caches, rssBytes: m.rssBytes, nativeBytesInUse: m.nativeBytesInUse }));
    } catch {
      this.stageReportFailures.inc();
      return [];
    } finally {
      clearTimeout(timer);
    }
  }

  /** What watches one request: times it from `queued` to its end, counts its steps and its error. */
  private watch(): RequestWatch {
    let queuedAt: number | undefined;
    let task: string | undefined;
    let steps = 0;
    const end = (outcome: 'completed' | 'failed' | 'cancelled') => {
      if (queuedAt === undefined) return;
      this.requestSeconds.observe({ task: task ?? 'none', outcome }, (performance.now() - queuedAt) / 1000);
      if (task !== undefined) this.requestSteps.observe({ task }, steps);
      queuedAt = undefined;
    };
    return {
      event: (ev) => {
        if (ev.type === 'queued') queuedAt = performance.now();
        else if (ev.type === 'admitted') {
          task = String(ev.params.task);
          if (queuedAt !== undefined) this.queueSeconds.observe({ task }, (performance.now() - queuedAt) / 1000);
        } else if (ev.type === 'step') {
          steps += 1;
          this.stepSeconds.observe(ev.ms / 1000);
        } else if (ev.type === 'final') end('completed');
        else if (ev.type === 'error') {
          this.errors.inc({ code: ev.code });
          end('failed');
        }
      },
      cancelled: () => end('cancelled'),
    };
  }
}
