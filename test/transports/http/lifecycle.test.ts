/**
 * A server's life: job events over SSE, metrics, drain and close, the queue's bound. SSE streams and what closing the
 * listener does go over a real socket; what a response alone shows goes through `app.inject()`.
 */
import type { FastifyInstance } from 'fastify';
import { PNG } from 'pngjs';
import { createApp, startServer, readSse, type TestServer } from './helpers';
import { makeModelsDir, poisonToOverflow, tinySpec } from '../../helpers/tiny-model';
import { createServer } from '../../../transports/server';
import { parseServeArgs } from '../../../src/cli/serve';
import { Engine } from '../../../src/engine/engine';
import { builtinFamilies } from '../../../src/families';

let modelsDir: string;

beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

async function createJob(s: TestServer, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await fetch(`${s.origin}/v1/videos`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, any>;
}

/** Creates a video job through `app.inject()`; expects 200 and returns the job object. */
async function injectJob(app: FastifyInstance, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await app.inject({ method: 'POST', url: '/v1/videos', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  expect(res.statusCode).toBe(200);
  return res.json() as Record<string, any>;
}

/** The value of a metric line `name{labels} value` in Prometheus text, or undefined. */
function metric(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('SSE job events', () => {
  let s: TestServer;
  beforeAll(async () => {
    const dir = await makeModelsDir([{ spec: tinySpec('tiny-nan'), seed: 1 }]);
    poisonToOverflow(dir, 'tiny-nan');
    s = await startServer({ modelsDir: dir });
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('streams step progress and ends with final once the MP4 is ready; a late subscriber gets the same history replayed', async () => {
    const job = await createJob(s, { prompt: 'a red ball', size: '16x16', num_frames: 3, fps: 6, num_inference_steps: 4, seed: 3 });
    const live = await readSse(`${s.origin}/v1/videos/${job.id}/events`);
    expect(live.status).toBe(200);
    expect(live.contentType).toMatch(/^text\/event-stream/);
    const types = live.events.map((e) => e.event);
    expect(types.at(-1)).toBe('final');
    const steps = live.events.filter((e) => e.event === 'step').map((e) => [e.data.index, e.data.total]);
    expect(steps).toEqual([
      [0, 4],
      [1, 4],
      [2, 4],
      [3, 4],
    ]);
    const final = live.events.at(-1)!.data;
    // Artifacts are summarised (shape only), never base64 frames.
    expect(final).toEqual({
      type: 'final',
      requestId: job.id,
      seed: 3,
      ms: expect.any(Number),
      artifacts: { video: { kind: 'video', width: 16, height: 16, numFrames: 3, fps: 6 } },
    });
    expect(JSON.stringify(live.events).length).toBeLessThan(10_000);
    // `final` on the stream means the content is downloadable.
    const content = await fetch(`${s.origin}/v1/videos/${job.id}/content`);
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    const late = await readSse(`${s.origin}/v1/videos/${job.id}/events`);
    expect(late.events).toEqual(live.events);
  });

  it('preview_every puts partial results on the stream: chunk events with a PNG of the predicted first frame', async () => {
    const job = await createJob(s, { prompt: 'a red ball', size: '16x16', num_frames: 3, fps: 6, num_inference_steps: 4, seed: 3, preview_every: 1 });
    const sse = await readSse(`${s.origin}/v1/videos/${job.id}/events`);
    const order = sse.events.filter((e) => e.event === 'step' || e.event === 'chunk').map((e) => (e.event === 'step' ? `step${e.data.index}` : 'preview'));
    expect(order).toEqual(['step0', 'preview', 'step1', 'preview', 'step2', 'preview', 'step3']);
    const pngs = sse.events
      .filter((e) => e.event === 'chunk')
      .map((e) => {
        expect(e.data).toMatchObject({ node: 'denoise', artifact: { kind: 'image', width: 16, height: 16 }, preview: { width: 16, height: 16 } });
        return PNG.sync.read(Buffer.from((e.data.preview as { png_b64: string }).png_b64, 'base64'));
      });
    expect(pngs.map((p) => [p.width, p.height])).toEqual([
      [16, 16],
      [16, 16],
      [16, 16],
    ]);
    // Successive predictions of the same video differ (the sampler moves), and the job still ends with its MP4.
    expect(Buffer.compare(pngs[0]!.data, pngs[2]!.data)).not.toBe(0);
    expect(sse.events.at(-1)!.event).toBe('final');
    for (const bad of [0, -1, 2.5, 'x']) {
      const r = await fetch(`${s.origin}/v1/videos`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'a', preview_every: bad }),
      });
      expect([bad, r.status, ((await r.json()) as any).error.param]).toEqual([bad, 400, 'preview_every']);
    }
  });

  it('a job that fails while running streams an error event and reports it in the job object', async () => {
    // Model tiny-nan's DiT output weights overflow: its first denoise step yields non-finite values.
    const job = await createJob(s, { prompt: 'a', model: 'tiny-nan', size: '8x8', num_frames: 1, num_inference_steps: 2 });
    const sse = await readSse(`${s.origin}/v1/videos/${job.id}/events`);
    const last = sse.events.at(-1)!;
    expect(last.event).toBe('error');
    expect(last.data).toMatchObject({ code: 'OMNIRX_ERR_NON_FINITE', node: 'denoise' });
    const got = (await (await fetch(`${s.origin}/v1/videos/${job.id}`)).json()) as Record<string, any>;
    expect(got).toMatchObject({ status: 'failed', error: { code: 'OMNIRX_ERR_NON_FINITE', message: expect.any(String) } });
    const content = await fetch(`${s.origin}/v1/videos/${job.id}/content`);
    expect(content.status).toBe(409);
    expect(((await content.json()) as { error: { message: string } }).error.message).toBe(
      `video '${job.id}' failed (OMNIRX_ERR_NON_FINITE); it has no content`,
    );
  });
});

describe('metrics', () => {
  it('queue, step-time, latency and failure metrics change after a job and a rejected request', async () => {
    const app = await createApp({ modelsDir });
    try {
      const before = (await app.inject({ url: '/metrics' })).body;
      expect(metric(before, 'omnirx_step_duration_seconds_count')).toBe(0);
      expect(before).toContain('# TYPE omnirx_queue_depth gauge');
      expect(metric(before, 'omnirx_running')).toBe(0);
      const job = await injectJob(app, { prompt: 'a', size: '8x8', num_frames: 2, num_inference_steps: 3 });
      // The job's event stream ends with the job: inject() answers once it has.
      await app.inject({ url: `/v1/videos/${job.id}/events` });
      await app.inject({ method: 'POST', url: '/v1/videos', headers: { 'content-type': 'application/json' }, payload: '{' });
      const after = (await app.inject({ url: '/metrics' })).body;
      expect(metric(after, 'omnirx_step_duration_seconds_count')).toBe(3);
      expect(metric(after, 'omnirx_jobs_total{status="completed"}')).toBe(1);
      expect(metric(after, 'omnirx_failures_total{code="invalid_json"}')).toBe(1);
      expect(metric(after, 'omnirx_stored_videos')).toBe(1);
      expect(metric(after, 'omnirx_running')).toBe(0);
      expect(metric(after, 'omnirx_http_request_duration_seconds_count{method="POST",route="/v1/videos",status="200"}')).toBe(1);
      // A second server has its own registry: nothing leaks between them.
      const other = await createServer({
        engine: {
          generate: () => {
            throw new Error('unused');
          },
          listModels: () => [],
          stats: () => ({ queued: 0, running: 0 }),
          health: () => ({ status: 'ok' }),
          models: { get: () => Promise.reject(new Error('unused')) },
          session: () => Promise.reject(new Error('unused')),
          close: async () => undefined,
        },
      });
      expect(metric(await other.omnirx.metrics.registry.metrics(), 'omnirx_jobs_total{status="completed"}')).toBeUndefined();
      await other.close();
    } finally {
      await app.close();
    }
  });
});

describe('drain', () => {
  it('stops admitting (503, /ready 503), lets the in-flight job finish, then closes', async () => {
    const s = await startServer({ modelsDir });
    expect((await fetch(`${s.origin}/ready`)).status).toBe(200);
    const job = await createJob(s, { prompt: 'a', size: '32x32', num_frames: 16, num_inference_steps: 20, guidance_scale: 1 });
    const jobs = s.app.omnirx.jobs;
    const draining = s.app.omnirx.drain(600_000);
    const ready = await fetch(`${s.origin}/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as any).error.code).toBe('OMNIRX_ERR_UNAVAILABLE');
    const refused = await fetch(`${s.origin}/v1/videos`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ prompt: 'late' }),
    });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as any).error).toMatchObject({ code: 'OMNIRX_ERR_UNAVAILABLE', type: 'service_unavailable_error' });
    expect(await draining).toEqual({ finished: 1, failed: 0 });
    expect(jobs.get(job.id)?.status).toBe('completed');
    expect(s.app.server.listening).toBe(false);
  });

  it('fails the jobs still running when the wait runs out', async () => {
    const app = await createApp({ modelsDir });
    const job = await injectJob(app, { prompt: 'a', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 });
    const jobs = app.omnirx.jobs;
    const record = jobs.get(job.id)!;
    expect(await app.omnirx.drain(0)).toEqual({ finished: 0, failed: 1 });
    expect(record.status).toBe('failed');
    expect(record.error).toEqual({ code: 'OMNIRX_ERR_UNAVAILABLE', message: 'the server shut down before the job finished' });
  });

  it('closing the server ends the open event streams of running jobs with an error event', async () => {
    const s = await startServer({ modelsDir });
    const job = await createJob(s, { prompt: 'a', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 });
    let firstStep!: () => void;
    const stepped = new Promise<void>((resolve) => (firstStep = resolve));
    const sse = readSse(`${s.origin}/v1/videos/${job.id}/events`, { onEvent: (e) => (e.event === 'step' ? firstStep() : undefined) });
    await stepped;
    await s.app.close();
    const last = (await sse).events.at(-1)!;
    expect(last.event).toBe('error');
    expect(last.data).toMatchObject({ code: 'OMNIRX_ERR_UNAVAILABLE', message: 'the server closed before the job finished' });
  });

  it('answers 503 on /ready and new work while the engine is not up', async () => {
    let up!: (e: never) => void;
    const app = await createServer({ engine: new Promise((resolve) => (up = resolve as never)) });
    const ready = await app.inject({ url: '/ready' });
    expect(ready.statusCode).toBe(503);
    const create = await app.inject({
      method: 'POST',
      url: '/v1/videos',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ prompt: 'a' }),
    });
    expect(create.statusCode).toBe(503);
    expect((create.json() as any).error.code).toBe('OMNIRX_ERR_UNAVAILABLE');
    expect((await app.inject({ url: '/health' })).statusCode).toBe(200);
    up({
      generate: () => {
        throw new Error('unused');
      },
      listModels: () => ['m'],
      stats: () => ({ queued: 0, running: 0 }),
      health: () => ({ status: 'ok' }),
      models: { get: () => Promise.reject(new Error('unused')) },
      close: async () => undefined,
    } as never);
    await app.omnirx.engineReady;
    expect((await app.inject({ url: '/ready' })).statusCode).toBe(200);
    await app.close();
  });
});

describe('queue full', () => {
  it('answers 429 OMNIRX_ERR_QUEUE_FULL when the engine queue is at its bound, and the job is not listed', async () => {
    const engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', maxRunning: 1, maxQueued: 0 });
    const app = await createApp({ engine });
    try {
      const long = await injectJob(app, { prompt: 'a', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 });
      expect(long.status).toBe('in_progress');
      const res = await app.inject({
        method: 'POST',
        url: '/v1/videos',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ prompt: 'b' }),
      });
      expect(res.statusCode).toBe(429);
      expect((res.json() as any).error).toMatchObject({ type: 'rate_limit_error', code: 'OMNIRX_ERR_QUEUE_FULL' });
      const list = (await app.inject({ url: '/v1/videos' })).json() as { data: Array<{ id: string }> };
      expect(list.data.map((v) => v.id)).toEqual([long.id]);
    } finally {
      await app.close();
    }
  });
});

describe('omnirx serve arguments', () => {
  it('binds 127.0.0.1:8000 by default, takes the api key from OMNIRX_API_KEY, and rejects a bad port', () => {
    expect(parseServeArgs([], { OMNIRX_API_KEY: 'sekret' }, () => undefined)).toEqual({
      host: '127.0.0.1',
      port: 8000,
      drainTimeoutMs: 30000,
      logLevel: 'info',
      apiKey: 'sekret',
    });
    expect(parseServeArgs(['--port', '0', '--host', '0.0.0.0', '--api-key', 'a', '--models-dir', '/m'], {}, () => undefined)).toEqual({
      host: '0.0.0.0',
      port: 0,
      drainTimeoutMs: 30000,
      logLevel: 'info',
      apiKey: 'a',
      modelsDir: '/m',
    });
    expect(() => parseServeArgs(['--port', '70000'], {}, () => undefined)).toThrow(/--port must be an integer in \[0, 65535\]/);
    expect(parseServeArgs(['--log-level', 'debug'], {}, () => undefined)).toMatchObject({ logLevel: 'debug' });
    expect(() => parseServeArgs(['--log-level', 'loud'], {}, () => undefined)).toThrow(
      /--log-level.*loud.*Allowed choices are trace, debug, info, warn, error, fatal, silent/,
    );
  });

  it('refuses an empty or blank api key, from the flag or the environment, rather than serving without auth', async () => {
    for (const key of ['', '  ']) {
      expect(() => parseServeArgs(['--api-key', key], {}, () => undefined)).toThrow(
        expect.objectContaining({ code: 'OMNIRX_ERR_CLI_ARGUMENT', message: expect.stringMatching(/--api-key must not be empty/) }),
      );
      expect(() => parseServeArgs([], { OMNIRX_API_KEY: key }, () => undefined)).toThrow(/OMNIRX_API_KEY is set but empty/);
      await expect(createServer({ apiKey: key, families: [] })).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'apiKey' });
    }
    // the flag wins over an empty environment variable; no key at all serves without auth
    expect(parseServeArgs(['--api-key', 'k'], { OMNIRX_API_KEY: '' }, () => undefined)).toMatchObject({ apiKey: 'k' });
    expect(parseServeArgs([], {}, () => undefined)).not.toHaveProperty('apiKey');
  });
});
