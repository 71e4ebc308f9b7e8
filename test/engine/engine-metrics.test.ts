import { lastValueFrom, firstValueFrom, filter, toArray } from 'rxjs';
import { Registry } from 'prom-client';
import { Engine } from '../../src/engine/engine';
import { EngineMetrics, processMetrics, type MeteredEngine } from '../../src/engine/engine-metrics';
import { builtinFamilies } from '../../src/families';
import { loadNative } from '../../src/native/binding';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { inProcess } from '../helpers/engine';
import { settledBytesInUse } from '../helpers/native-memory';
import { makeModelsDir } from '../helpers/tiny-model';

const native = loadNative();

/** The value of a metric line `name{labels} value` in Prometheus text, or undefined. */
function metric(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const req = (over: Partial<OmniRequestInput> = {}): OmniRequestInput => ({
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball in a blue room' },
  diffusion: { seed: 7, numInferenceSteps: 2 },
  ...over,
});

let modelsDir: string;
beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

describe('EngineMetrics over an engine with no server', () => {
  let engine: Engine;
  let metrics: EngineMetrics;
  beforeAll(async () => {
    engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', memoryBudgetBytes: 2 ** 30 });
    metrics = new EngineMetrics(engine);
  });
  afterAll(async () => {
    metrics.close();
    await engine.close();
  });

  it('exposes the engine gauges and the process metrics before any request', async () => {
    const text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_queue_depth')).toBe(0);
    expect(metric(text, 'omnirx_running')).toBe(0);
    expect(metric(text, 'omnirx_admitted_memory_bytes')).toBe(0);
    expect(metric(text, 'omnirx_admission_budget_bytes')).toBe(2 ** 30);
    expect(metric(text, 'omnirx_world_sessions')).toBe(0);
    expect(metric(text, 'omnirx_engine_health')).toBe(0);
    expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBeUndefined();
    expect(metric(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    expect(text).toContain('# TYPE nodejs_heap_size_used_bytes gauge');
  });

  it('times, counts and prices one completed request by task and outcome', async () => {
    const events = await lastValueFrom(engine.generate(req()).pipe(toArray()));
    expect(events.at(-1)!.type).toBe('final');
    const text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
    expect(metric(text, 'omnirx_request_duration_seconds_sum{task="T2V",outcome="completed"}')).toBeGreaterThan(0);
    expect(metric(text, 'omnirx_request_queue_seconds_count{task="T2V"}')).toBe(1);
    expect(metric(text, 'omnirx_request_steps_count{task="T2V"}')).toBe(1);
    expect(metric(text, 'omnirx_request_steps_sum{task="T2V"}')).toBe(2);
    expect(metric(text, 'omnirx_step_duration_seconds_count')).toBe(2);
    expect(metric(text, 'omnirx_running')).toBe(0);
    // The feature cache holds the prompt's embedding now: the gauges say what the cache itself says.
    const f = inProcess(engine).caches.stats().features!;
    expect(f.entries).toBeGreaterThan(0);
    expect(metric(text, 'omnirx_feature_cache_entries{stage="monolithic"}')).toBe(f.entries);
    expect(metric(text, 'omnirx_feature_cache_bytes{stage="monolithic"}')).toBe(f.bytes);
    expect(metric(text, 'omnirx_feature_cache_misses_total{stage="monolithic"}')).toBe(f.misses);
    expect(metric(text, 'omnirx_feature_cache_hits_total{stage="monolithic"}')).toBe(f.hits);
    expect(metric(text, 'omnirx_feature_cache_budget_bytes{stage="monolithic"}')).toBe(64 * 2 ** 20);
    // No world session opened: no chunk-KV pool yet.
    expect(metric(text, 'omnirx_chunk_kv_bytes_in_use{stage="monolithic"}')).toBeUndefined();
  });

  it('reads native bytes in use from the addon at scrape', async () => {
    const settled = await settledBytesInUse(native);
    const text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_native_bytes_in_use')).toBe(settled);
    expect(metric(text, 'omnirx_native_bytes_in_use')).toBe(native.stats().bytesInUse);
    expect(metric(text, 'omnirx_native_buffers')).toBe(native.stats().buffers);
  });

  it('counts failures, refusals and cancels apart', async () => {
    const before = await metrics.registry.metrics();
    const codeCount = (t: string, code: string) => metric(t, `omnirx_request_errors_total{code="${code}"}`) ?? 0;
    // Refused at the door (invalid): an error, never queued, so not timed.
    await lastValueFrom(engine.generate({ ...req(), task: 'NOPE' } as unknown as OmniRequestInput).pipe(toArray()));
    // Failed while queued (unknown model): timed as failed, with no task (never admitted).
    await lastValueFrom(engine.generate(req({ model: 'nope' })).pipe(toArray()));
    // Cancelled once admitted.
    const long = engine.generate(req({ diffusion: { seed: 1, numInferenceSteps: 50 } }));
    const sub = long.subscribe();
    sub.unsubscribe();
    const admittedThenCancelled = engine.generate(req({ diffusion: { seed: 2, numInferenceSteps: 50 } }));
    await firstValueFrom(admittedThenCancelled.pipe(filter((e) => e.type === 'step')));
    const after = await metrics.registry.metrics();
    expect(codeCount(after, 'OMNIRX_ERR_INVALID_REQUEST') - codeCount(before, 'OMNIRX_ERR_INVALID_REQUEST')).toBe(1);
    expect(codeCount(after, 'OMNIRX_ERR_UNKNOWN_MODEL') - codeCount(before, 'OMNIRX_ERR_UNKNOWN_MODEL')).toBe(1);
    expect(metric(after, 'omnirx_request_duration_seconds_count{task="none",outcome="failed"}')).toBe(1);
    expect(metric(after, 'omnirx_request_duration_seconds_count{task="none",outcome="cancelled"}')).toBe(1);
    expect(metric(after, 'omnirx_request_duration_seconds_count{task="T2V",outcome="cancelled"}')).toBe(1);
    expect(metric(after, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
    expect(metric(after, 'omnirx_request_steps_count{task="T2V"}')).toBe(2);
  });

  it('two metrics objects on their own registries share no counts; close removes its metrics from a given registry', async () => {
    const registry = new Registry();
    const second = new EngineMetrics(engine, { registry });
    await lastValueFrom(engine.generate(req()).pipe(toArray()));
    const mine = await registry.metrics();
    expect(metric(mine, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
    expect(metric(await metrics.registry.metrics(), 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(2);
    second.close();
    expect(await registry.metrics()).toBe('\n');
    // The process metrics are the same objects everywhere: one event-loop monitor per process.
    expect(metrics.registry.getSingleMetric('process_resident_memory_bytes')).toBe(processMetrics().getSingleMetric('process_resident_memory_bytes'));
  });

  it('health reads 2 once the engine is closed', async () => {
    const e = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny' });
    const m = new EngineMetrics(e, { processMetrics: false });
    await e.close();
    expect(metric(await m.registry.metrics(), 'omnirx_engine_health')).toBe(2);
    m.close();
  });
});

describe('EngineMetrics over stages', () => {
  it('reports the caches by stage (in-process stages)', async () => {
    const engine = await Engine.create({
      families: builtinFamilies(),
      modelsDir,
      defaultModel: 'tiny',
      topology: { kind: 'disaggregated', connector: 'in-process' },
    });
    const metrics = new EngineMetrics(engine, { processMetrics: false });
    try {
      await lastValueFrom(engine.generate(req()).pipe(toArray()));
      const text = await metrics.registry.metrics();
      expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
      const memory = await (engine.executor as unknown as { memory(): Promise<Record<string, { caches: { features?: { entries: number } } }>> }).memory();
      for (const [stage, m] of Object.entries(memory)) {
        expect([stage, metric(text, `omnirx_feature_cache_entries{stage="${stage}"}`)]).toEqual([stage, m.caches.features?.entries]);
      }
      expect(Object.values(memory).some((m) => (m.caches.features?.entries ?? 0) > 0)).toBe(true);
    } finally {
      metrics.close();
      await engine.close();
    }
  });

  it("reads each stage process's resident and native bytes, and a stage that does not answer cannot hang the scrape", async () => {
    let answer: 'ok' | 'never' | 'fail' = 'ok';
    const stage = (rssBytes: number) => ({
      role: 'encode',
      components: [],
      weightBytes: {},
      encoderBytes: 0,
      sessions: { open: 0, chunkKvSlabs: 0 },
      caches: { budgets: {} },
      pid: 1,
      rssBytes,
      nativeBytesInUse: rssBytes / 2,
    });
    const fake: MeteredEngine = {
      stats: () => ({ queued: 3, running: 1 }),
      health: () => ({ status: 'degraded', reason: 'restarting' }),
      executor: {
        memory: () =>
          answer === 'ok'
            ? Promise.resolve({ encode: stage(1000), denoise: stage(2000), decode: stage(3000) })
            : answer === 'fail'
              ? Promise.reject(new Error('the decode stage process did not report its memory'))
              : new Promise(() => undefined),
      },
    };
    const metrics = new EngineMetrics(fake, { processMetrics: false, stageReportTimeoutMs: 50 });
    let text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_queue_depth')).toBe(3);
    expect(metric(text, 'omnirx_engine_health')).toBe(1);
    expect(metric(text, 'omnirx_stage_resident_memory_bytes{stage="denoise"}')).toBe(2000);
    expect(metric(text, 'omnirx_stage_native_bytes_in_use{stage="decode"}')).toBe(1500);
    expect(metric(text, 'omnirx_stage_report_failures_total')).toBe(0);
    answer = 'never';
    const t0 = performance.now();
    text = await metrics.registry.metrics();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(metric(text, 'omnirx_stage_resident_memory_bytes{stage="denoise"}')).toBeUndefined();
    expect(metric(text, 'omnirx_stage_report_failures_total')).toBe(1);
    answer = 'fail';
    text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_stage_report_failures_total')).toBe(2);
    metrics.detach();
    text = await metrics.registry.metrics();
    expect(metric(text, 'omnirx_queue_depth')).toBe(0);
    metrics.close();
  });
});
