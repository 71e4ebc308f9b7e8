/**
 * World sessions over `/v1/stream`: credits pass through to the session so the rollout itself stalls without them,
 * an action changes the `frame` metadata of the frames generated after it, flush and close work, and closing the
 * socket (or sending `close`) frees the session in the engine.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Engine } from '../../../src/engine/engine';
import { makeModelsDir, tinyWorldSpec } from '../../helpers/tiny-model';
import { startServer, type TestServer } from '../http/helpers';
import { StreamClient } from './stream-client';
import { probeVideo } from '../../helpers/ffprobe';
import { builtinFamilies } from '../../../src/families';

let engine: Engine;
let server: TestServer;

beforeAll(async () => {
  const modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
  engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, maxSessions: 2 },
  });
  server = await startServer({ engine, modelsDir });
});

afterAll(async () => {
  await server.app.close();
});

/** Resolves once the engine holds no session (sessions are freed once their in-flight native work settles). */
async function sessionsFreed(): Promise<number> {
  while (engine.stats().sessions > 0) await new Promise((r) => setImmediate(r));
  return engine.stats().sessions;
}

describe('world sessions over /v1/stream', () => {
  it('frames only as credited; an action sent while the rollout is stalled applies to the next frame; close ends and frees it', async () => {
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'session', prompt: 'a red ball', seed: 5, fps: 10 });
    c.send({ type: 'credit', frames: 2 });
    await c.waitJson('frame', (f) => f.pts === 1);
    expect(engine.stats().sessions).toBe(1);
    // Stalled: no credit left, so chunk 2 has not started. An action now is sampled when it does.
    c.send({ type: 'action', key: 'up', id: 'a1' });
    c.send({ type: 'credit', frames: 1 });
    await c.waitJson('frame', (f) => f.pts === 2);
    c.send({ type: 'action', key: 'left', vector: [0.5, -0.5] });
    c.send({ type: 'credit', frames: 2 });
    await c.waitJson('frame', (f) => f.pts === 4);
    c.send({ type: 'close' });
    const end = await c.waitJson('end');
    expect(end).toEqual({ type: 'end', frames: 5, reason: 'closed' });
    const frames = c.json('frame');
    expect(frames.map((f) => [f.pts, f.chunk, f.ptsMs])).toEqual([
      [0, 0, 0],
      [1, 1, 100],
      [2, 2, 200],
      [3, 3, 300],
      [4, 4, 400],
    ]);
    expect(frames.map((f) => f.action)).toEqual([
      { key: 'none' },
      { key: 'none' },
      { key: 'up', id: 'a1' },
      { key: 'left', vector: [0.5, -0.5] },
      { key: 'left', vector: [0.5, -0.5] },
    ]);
    expect(c.json('init')[0]).toMatchObject({ format: 'fmp4', width: 16, height: 16, fps: 10 });
    expect(c.json('admitted')[0]).toMatchObject({ model: 'tiny-world', params: { task: 'WORLD', seed: 5 } });
    expect(c.json('progress').length).toBe(16 + 4 * 2); // chunk 0: sessions.firstChunkSteps (default 16); then 2 steps each
    // Exactly one fragment per credit: init + 5.
    const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-ws-session-'));
    writeFileSync(path.join(dir, 's.mp4'), Buffer.concat(c.binaries()));
    expect(c.binaries()).toHaveLength(6);
    const probe = probeVideo(path.join(dir, 's.mp4'));
    expect(probe).toMatchObject({ nb_read_frames: '5', width: 16, height: 16 });
    expect((await c.closed).code).toBe(1000);
    expect(await sessionsFreed()).toBe(0);
  });

  it('raw H.264 for a session (at η 0.5): Annex-B units, one per credit granted; closing the socket frees the session', async () => {
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'session', prompt: 'a ball', format: 'h264', eta: 0.5 });
    c.send({ type: 'credit', frames: 3 });
    await c.waitJson('frame', (f) => f.pts === 2);
    c.send({ type: 'credit', frames: 0 });
    await c.waitJson('error', (e) => e.param === 'frames');
    expect(c.json('frame')).toHaveLength(3);
    expect(c.binaries()).toHaveLength(3);
    expect([...c.binaries()[0]!.subarray(0, 5)]).toEqual([0, 0, 0, 1, 0x67]);
    // The message's eta reached the session.
    expect(c.json('admitted')[0]).toMatchObject({ params: { task: 'WORLD', eta: 0.5 } });
    c.ws.close();
    await c.closed;
    expect(await sessionsFreed()).toBe(0);
  });

  it('closing the socket mid-rollout closes the session; bad actions and session fields are refused by name', async () => {
    const c = await StreamClient.connect(server.origin);
    // A blank prompt is refused as on POST /v1/videos (the library takes "" as unconditional; a client sending it is
    // far more often a bug).
    c.send({ type: 'session', prompt: '   ' });
    expect(await c.waitJson('error', (e) => e.param === 'prompt')).toMatchObject({ code: 'invalid_message', fatal: false });
    c.send({ type: 'session', prompt: 'a ball', size: '18x18' });
    expect(await c.waitJson('error', (e) => e.param === 'size')).toMatchObject({ fatal: false });
    c.send({ type: 'session', prompt: 'a ball', seed: -1 });
    expect(await c.waitJson('error', (e) => e.param === 'seed')).toMatchObject({ fatal: false });
    c.send({ type: 'session', prompt: 'a ball', eta: 1.5 });
    expect(await c.waitJson('error', (e) => e.param === 'eta')).toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', fatal: false });
    c.send({ type: 'session', prompt: 'a ball', eta: 'all' });
    expect(await c.waitJson('error', (e) => e.param === 'eta' && e.code === 'invalid_message')).toMatchObject({ fatal: false });
    c.send({ type: 'session', prompt: 'a ball', image: { width: 16, height: 16, data: Buffer.alloc(10).toString('base64') } });
    expect(await c.waitJson('error', (e) => e.param === 'image.data')).toMatchObject({ fatal: false });
    c.send({ type: 'session', prompt: 'a ball' });
    c.send({ type: 'action', key: 'up', vector: [1] });
    expect(await c.waitJson('error', (e) => e.param === 'vector')).toMatchObject({ code: 'invalid_message', fatal: false });
    // finite as JSON's float64, past the bound that keeps the model's float32 activations finite: refused on arrival
    c.send({ type: 'action', key: 'left', vector: [1e308, -1e308] });
    expect(await c.waitJson('error', (e) => e.param === 'vector.0')).toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(/1000/),
      fatal: false,
    });
    c.send({ type: 'credit', frames: 64 });
    await c.waitJson('frame', (f) => f.pts === 3);
    expect(engine.stats().sessions).toBe(1);
    c.send({ type: 'flush' });
    c.ws.terminate();
    await c.closed;
    expect(await sessionsFreed()).toBe(0);
  });
});
