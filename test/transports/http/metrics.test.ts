import type { FastifyInstance } from 'fastify';
import { createServer } from '../../../transports/server';
import { loadNative } from '../../../src/native/binding';
import { createApp } from './helpers';

/** The value of a metric line `name{labels} value` in Prometheus text, or undefined. */
function metric(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const scrape = async (app: FastifyInstance) => (await app.inject({ url: '/metrics' })).body;

describe('/metrics', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createApp();
  });
  afterAll(async () => {
    await app.close();
  });

  it("has the process's default metrics, the engine's gauges, and each name once", async () => {
    const text = await scrape(app);
    expect(metric(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    expect(text).toContain('# TYPE nodejs_gc_duration_seconds histogram');
    expect(metric(text, 'omnirx_queue_depth')).toBe(0);
    expect(metric(text, 'omnirx_running')).toBe(0);
    expect(metric(text, 'omnirx_engine_health')).toBe(0);
    expect(metric(text, 'omnirx_admission_budget_bytes')).toBe(8 * 2 ** 30);
    expect(metric(text, 'omnirx_native_bytes_in_use')).toBe(loadNative().stats().bytesInUse);
    expect(metric(text, 'omnirx_feature_cache_budget_bytes{stage="monolithic"}')).toBe(64 * 2 ** 20);
    const types = text.split('\n').filter((l) => l.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
  });

  it('counts every request the engine runs once, whichever route sent it', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/videos',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ prompt: 'a', size: '8x8', num_frames: 2, num_inference_steps: 3 }),
    });
    await app.inject({ url: `/v1/videos/${(res.json() as { id: string }).id}/events` });
    const image = await app.inject({
      method: 'POST',
      url: '/v1/images/generations',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ prompt: 'a', size: '8x8', num_inference_steps: 2 }),
    });
    expect(image.statusCode).toBe(200);
    const text = await scrape(app);
    expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
    expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2I",outcome="completed"}')).toBe(1);
    expect(metric(text, 'omnirx_request_steps_sum{task="T2V"}')).toBe(3);
    expect(metric(text, 'omnirx_step_duration_seconds_count')).toBe(5);
    expect(metric(text, 'omnirx_native_bytes_in_use')).toBe(loadNative().stats().bytesInUse);
  });

  it('a server over a stand-in engine serves the gauges it can read, on a registry of its own', async () => {
    const other = await createServer({
      engine: {
        generate: () => {
          throw new Error('unused');
        },
        listModels: () => [],
        stats: () => ({ queued: 2, running: 1 }),
        health: () => ({ status: 'ok' }),
        models: { get: () => Promise.reject(new Error('unused')) },
        session: () => Promise.reject(new Error('unused')),
        close: async () => undefined,
      },
    });
    await other.omnirx.engineReady;
    const text = await scrape(other);
    expect(metric(text, 'omnirx_queue_depth')).toBe(2);
    expect(metric(text, 'omnirx_running')).toBe(1);
    expect(metric(text, 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBeUndefined();
    expect(metric(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    await other.close();
    expect(metric(await scrape(app), 'omnirx_request_duration_seconds_count{task="T2V",outcome="completed"}')).toBe(1);
  });
});
