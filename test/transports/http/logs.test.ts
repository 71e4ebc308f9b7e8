import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { createServer } from '../../../transports/server';
import { builtinFamilies } from '../../../src/families';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { makeModelsDir } from '../../helpers/tiny-model';
import { createApp } from './helpers';

/** A stream that keeps every JSON log line written to it. */
function logSink(): Writable & { entries: Array<Record<string, unknown>> } {
  const entries: Array<Record<string, unknown>> = [];
  let buf = '';
  const w = new Writable({
    write(chunk: Buffer, _enc, done) {
      buf += chunk.toString('utf8');
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        entries.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
      }
      done();
    },
  });
  return Object.assign(w, { entries });
}

/** Polls until `pred` holds (job lifecycle lines are written as the job runs). */
async function until(pred: () => boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out waiting for a log line');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('server logs', () => {
  let app: FastifyInstance;
  const sink = logSink();

  beforeAll(async () => {
    app = await createApp({ logLevel: 'info', logStream: sink });
  });
  afterAll(async () => {
    await app.close();
  });

  it('writes one access line per request with its request id (echoed as X-Request-Id); probes only at debug', async () => {
    const before = sink.entries.length;
    const models = await app.inject({ method: 'GET', url: '/v1/models', headers: { 'x-request-id': 'client-req-42' } });
    expect(models.statusCode).toBe(200);
    expect(models.headers['x-request-id']).toBe('client-req-42');
    await app.inject({ method: 'GET', url: '/health' });
    await app.inject({ method: 'GET', url: '/ready' });
    const lines = sink.entries.slice(before);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'request completed',
        reqId: 'client-req-42',
        method: 'GET',
        route: '/v1/models',
        status: 200,
        ms: expect.any(Number),
      }),
    ]);
  });

  it('replaces a hostile X-Request-Id (too long, odd characters) by a generated one, never echoing it', async () => {
    for (const hostile of ['x'.repeat(129), 'a b', 'id\u0007bell', '{"level":60}']) {
      const before = sink.entries.length;
      const r = await app.inject({ method: 'GET', url: '/v1/models', headers: { 'x-request-id': hostile } });
      const id = r.headers['x-request-id'];
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const line = sink.entries.slice(before).find((e) => e.msg === 'request completed');
      expect(line?.reqId).toBe(id);
      expect(JSON.stringify(sink.entries.slice(before))).not.toContain(hostile.slice(0, 20));
    }
  });

  it('logs a video job from creation (with the request id) to completion, and a failed job at warn with its code', async () => {
    const create = await app.inject({
      method: 'POST',
      url: '/v1/videos',
      headers: { 'x-request-id': 'make-video-1' },
      payload: { model: 'tiny', prompt: 'a red ball', num_frames: 5, size: '32x32' },
    });
    expect(create.statusCode).toBe(200);
    const jobId = create.json().id as string;
    await until(() => sink.entries.some((e) => e.jobId === jobId && e.msg === 'job completed'));
    const mine = sink.entries.filter((e) => e.jobId === jobId).map((e) => e.msg);
    expect(mine).toEqual(['job created', 'job admitted', 'job completed']);
    expect(sink.entries.find((e) => e.jobId === jobId && e.msg === 'job created')).toMatchObject({ reqId: 'make-video-1', model: 'tiny', level: 30 });
    expect(sink.entries.find((e) => e.jobId === jobId && e.msg === 'job completed')).toMatchObject({ ms: expect.any(Number), bytes: expect.any(Number) });

    // A job that fails after admission: a drain that runs out of time fails it.
    const slow = await app.inject({
      method: 'POST',
      url: '/v1/videos',
      payload: { model: 'tiny', prompt: 'a blue ball', num_frames: 9, size: '64x64', num_inference_steps: 50 },
    });
    const slowId = slow.json().id as string;
    expect(app.omnirx.jobs.failActive('OMNIRX_ERR_UNAVAILABLE', 'the server shut down before the job finished')).toBe(1);
    expect(sink.entries.find((e) => e.jobId === slowId && e.msg === 'job failed')).toMatchObject({ level: 40, code: 'OMNIRX_ERR_UNAVAILABLE' });
  });

  it('writes nothing at the default level, and refuses an unknown level naming logLevel', async () => {
    const quiet = logSink();
    const q = await createApp({ logStream: quiet });
    try {
      await q.inject({ method: 'GET', url: '/v1/models' });
      await q.inject({ method: 'GET', url: '/v1/nowhere' });
      expect(quiet.entries).toEqual([]);
    } finally {
      await q.close();
    }
    await expect(createServer({ families: builtinFamilies(), logLevel: 'loud' as never })).rejects.toMatchObject({
      code: 'OMNIRX_ERR_CONFIG',
      param: 'logLevel',
    });
  });
});

describe('models that cannot be served', () => {
  it('a model folder whose model.json does not read is warned about at start and not listed by /v1/models', async () => {
    const modelsDir = await makeModelsDir();
    mkdirSync(path.join(modelsDir, 'broken'));
    writeFileSync(path.join(modelsDir, 'broken', 'model.json'), '{"family": ');
    const sink = logSink();
    const app = await createApp({ modelsDir, logLevel: 'warn', logStream: sink });
    try {
      expect(sink.entries).toEqual([
        expect.objectContaining({ level: 40, msg: 'model is not served: its model.json cannot be used', model: 'broken', code: 'OMNIRX_ERR_MODEL_LOAD' }),
      ]);
      const list = await app.inject({ method: 'GET', url: '/v1/models' });
      expect((list.json() as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(['tiny']);
      expect((await app.inject({ method: 'GET', url: '/v1/models/broken' })).statusCode).toBe(404);
      // Asking for it is a 404 naming what is served, not a 500; an unknown model lists only the usable ones.
      for (const model of ['broken', 'zzz']) {
        const r = await app.inject({ method: 'POST', url: '/v1/videos', payload: { prompt: 'a', model } });
        expect(r.statusCode).toBe(404);
        expect(r.json().error).toMatchObject({
          code: 'OMNIRX_ERR_UNKNOWN_MODEL',
          param: 'model',
          message: expect.stringContaining(`model '${model}' is not served`),
        });
        expect(r.json().error.message).toMatch(/available: tiny \(GET \/v1\/models\)$/);
      }
      expect(sink.entries.filter((e) => (e.level as number) >= 50)).toEqual([]);
      // Fixed on disk: served without a restart.
      writeFileSync(path.join(modelsDir, 'broken', 'model.json'), readTiny(modelsDir));
      const again = await app.inject({ method: 'GET', url: '/v1/models' });
      expect((again.json() as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(['broken', 'tiny']);
    } finally {
      await app.close();
    }
  });
});

/** The tiny model's model.json with its id changed to 'broken' (its weights files are then looked up beside it). */
function readTiny(modelsDir: string): string {
  const spec = JSON.parse(readFileSync(path.join(modelsDir, 'tiny', 'model.json'), 'utf8')) as { id: string };
  return JSON.stringify({ ...spec, id: 'broken' });
}
