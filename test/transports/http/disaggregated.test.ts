/**
 * The HTTP server on a disaggregated deployment (Encode → Denoise → Decode stages, in-process connector): a video
 * job runs to a playable MP4 with the monolithic server's frames, a world session streams over `/v1/stream` with
 * actions and a flush, and an action the model cannot take is refused by name while the session keeps running.
 * The HTTP requests go through `app.inject()`; the `/v1/stream` sessions need the listening socket.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { parseDeployConfig } from '../../../src/placement/deploy-config';
import { expectH264Mp4 } from '../../media/helpers';
import { makeModelsDir, tinyWorldSpec } from '../../helpers/tiny-model';
import { StreamClient } from '../ws/stream-client';
import { probeVideo } from '../../helpers/ffprobe';
import { createApp, startServer, type TestServer } from './helpers';

const SESSIONS = { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, maxSessions: 2 };

let disagg: TestServer;
/** The monolithic deployment, for its frames: HTTP only, so it does not listen. */
let mono: FastifyInstance;
let dir: string;

beforeAll(async () => {
  const modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
  const base = { schemaVersion: 1, modelsDir, defaultModel: 'tiny', sessions: SESSIONS };
  disagg = await startServer({ modelsDir, deploy: parseDeployConfig({ ...base, topology: { kind: 'disaggregated', connector: 'in-process' } }) });
  mono = await createApp({ modelsDir, deploy: parseDeployConfig(base) });
  dir = mkdtempSync(path.join(tmpdir(), 'omnirx-disagg-http-'));
});

afterAll(async () => {
  await disagg.app.close();
  await mono.close();
});

/** Runs a video job to completion; returns the job object and the path of its downloaded MP4. */
async function videoJob(app: FastifyInstance, name: string, body: Record<string, unknown>): Promise<{ job: Record<string, unknown>; file: string }> {
  const res = await app.inject({ method: 'POST', url: '/v1/videos', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  expect(res.statusCode).toBe(200);
  let job = res.json() as Record<string, unknown>;
  while (job.status === 'queued' || job.status === 'in_progress') {
    await new Promise((r) => setTimeout(r, 20));
    job = (await app.inject({ url: `/v1/videos/${String(job.id)}` })).json() as Record<string, unknown>;
  }
  const content = await app.inject({ url: `/v1/videos/${String(job.id)}/content` });
  const file = path.join(dir, `${name}.mp4`);
  writeFileSync(file, content.rawPayload);
  return { job, file };
}

/** The RGB24 frames ffmpeg decodes from `file`. */
function decodedFrames(file: string): Buffer {
  return execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { maxBuffer: 1 << 24 });
}

describe('omnirx serve on a disaggregated deployment', () => {
  it('serves the deployment the config names: stages behind the front, the models from their model.json', async () => {
    const models = (await disagg.app.inject({ url: '/v1/models' })).json() as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toEqual(['tiny', 'tiny-world']);
    expect((await disagg.app.inject({ url: '/ready' })).json()).toEqual({ status: 'ready', queued: 0, running: 0, memoryBytes: 0, sessions: 0 });
  });

  it('a video job over HTTP completes with an H.264 MP4 whose frames equal the monolithic server’s', async () => {
    const body = { prompt: 'a red ball', seed: 11, num_frames: 3, fps: 6 };
    const d = await videoJob(disagg.app, 'disagg', body);
    expect(d.job).toMatchObject({ status: 'completed', progress: 100, seed: 11, num_frames: 3, fps: 6, size: '16x16', error: null });
    expectH264Mp4(d.file, { width: 16, height: 16, frames: 3, fps: 6 });
    const m = await videoJob(mono, 'mono', body);
    expect(m.job).toMatchObject({ status: 'completed', seed: 11 });
    const frames = decodedFrames(d.file);
    expect(frames.length).toBe(3 * 16 * 16 * 3);
    expect(frames.equals(decodedFrames(m.file))).toBe(true);
  });

  it('a world session over /v1/stream: admitted, credited frames with the actions sent, a flush, close', async () => {
    const c = await StreamClient.connect(disagg.origin);
    c.send({ type: 'session', model: 'tiny-world', prompt: 'a red ball', seed: 5, fps: 10 });
    c.send({ type: 'credit', frames: 2 });
    await c.waitJson('frame', (f) => f.pts === 1);
    c.send({ type: 'action', key: 'up', id: 'a1' });
    c.send({ type: 'flush' });
    c.send({ type: 'credit', frames: 1 });
    await c.waitJson('frame', (f) => f.pts === 2);
    c.send({ type: 'action', key: 'left', vector: [0.5, -0.5] });
    c.send({ type: 'credit', frames: 1 });
    await c.waitJson('frame', (f) => f.pts === 3);
    c.send({ type: 'close' });
    expect(await c.waitJson('end')).toEqual({ type: 'end', frames: 4, reason: 'closed' });
    expect(c.json('admitted')[0]).toMatchObject({
      model: 'tiny-world',
      params: { task: 'WORLD', seed: 5, width: 16, height: 16, fps: 10, chunkFrames: 1, stepsPerChunk: 2 },
    });
    const frames = c.json('frame');
    expect(frames.map((f) => [f.pts, f.chunk])).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(frames.map((f) => f.action)).toEqual([{ key: 'none' }, { key: 'none' }, { key: 'up', id: 'a1' }, { key: 'left', vector: [0.5, -0.5] }]);
    expect(c.json('progress').length).toBe(16 + 3 * 2); // chunk 0: sessions.firstChunkSteps (default 16); then 2 steps each
    expect(c.json('error')).toEqual([]);
    const file = path.join(dir, 'session.mp4');
    writeFileSync(file, Buffer.concat(c.binaries()));
    const probe = probeVideo(file);
    expect(probe).toMatchObject({ nb_read_frames: '4', width: 16, height: 16 });
    expect((await c.closed).code).toBe(1000);
  });

  it('an action the model cannot take is refused at the front, by name, and the session keeps running', async () => {
    const c = await StreamClient.connect(disagg.origin);
    // The tiny model has no action module: it takes only "none".
    c.send({ type: 'session', model: 'tiny', prompt: 'a ball', seed: 2 });
    c.send({ type: 'credit', frames: 1 });
    await c.waitJson('frame', (f) => f.pts === 0);
    c.send({ type: 'action', key: 'up', id: 'bad' });
    const err = await c.waitJson('error');
    expect(err).toMatchObject({ param: 'key', fatal: false, replyTo: 'bad' });
    expect(String(err.message)).toMatch(/no action module/);
    c.send({ type: 'credit', frames: 2 });
    await c.waitJson('frame', (f) => f.pts === 2);
    expect(c.json('frame').map((f) => f.action)).toEqual([{ key: 'none' }, { key: 'none' }, { key: 'none' }]);
    c.send({ type: 'close' });
    expect(await c.waitJson('end')).toEqual({ type: 'end', frames: 3, reason: 'closed' });
    expect(c.json('error')).toHaveLength(1);
  });
});
