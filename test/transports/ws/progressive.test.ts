/**
 * Progressive generations over `/v1/stream`: the finished latents are decoded a few frames at a time
 * (`decode_chunk_frames`, default 1) and each group goes into the fMP4 stream as soon as it is decoded, so the init
 * segment and the first fragment leave before the request's `final` event. The server runs a real engine on the tiny
 * model behind a wrapper that holds each `final` event until the test lets it through: with progressive decode the
 * client receives its first fragment while `final` is held; with `decode_chunk_frames: 0` (decode the whole clip,
 * then send) nothing arrives until it is released. Either way the MP4 is whole (ffprobe counts every frame once).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { concatMap, from, map, of } from 'rxjs';
import { Engine } from '../../../src/engine/engine';
import { builtinFamilies } from '../../../src/families';
import type { ServedEngine } from '../../../transports/shared/served-engine';
import { makeModelsDir } from '../../helpers/tiny-model';
import { startServer, type TestServer } from '../http/helpers';
import { probeVideo } from '../../helpers/ffprobe';
import { StreamClient } from './stream-client';

let server: TestServer;
let engine: Engine;
const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-ws-progressive-'));

/** What the wrapper waits for before it lets a request's `final` event through (set by each test). */
let holdFinal: () => Promise<void> = () => Promise.resolve();
/** Whether the first fragment had arrived when the held `final` event was let through, per request. */
const fragmentBeforeFinal: boolean[] = [];

beforeAll(async () => {
  engine = await Engine.create({ families: builtinFamilies(), modelsDir: await makeModelsDir(), defaultModel: 'tiny' });
  const served: ServedEngine = {
    generate: (r) => engine.generate(r).pipe(concatMap((ev) => (ev.type === 'final' ? from(holdFinal()).pipe(map(() => ev)) : of(ev)))),
    listModels: () => engine.listModels(),
    stats: () => engine.stats(),
    health: () => engine.health(),
    models: engine.models,
    session: (input) => engine.session(input),
    close: () => engine.close(),
  };
  server = await startServer({ engine: served });
});

afterAll(async () => {
  await server.app.close();
});

const REQUEST = { prompt: 'a red ball', size: '32x32', num_frames: 9, fps: 8, num_inference_steps: 2, seed: 7 };

/** Holds `final` until `c` received the init segment and one fragment, or `ms` passed; records which came first. */
function holdUntilFirstFragment(c: StreamClient, ms: number): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      let settled = false;
      const settle = (fragmentFirst: boolean): void => {
        if (settled) return;
        settled = true;
        fragmentBeforeFinal.push(fragmentFirst);
        resolve();
      };
      const timer = setTimeout(() => settle(false), ms);
      void c.waitBinaries(2).then(() => {
        clearTimeout(timer);
        settle(true);
      });
    });
}

/** Runs one fMP4 generation with all the credits it needs; `decode` is the message's decode_chunk_frames (absent: default). */
async function generate(decode: number | undefined, holdMs: number): Promise<StreamClient> {
  const c = await StreamClient.connect(server.origin);
  holdFinal = holdUntilFirstFragment(c, holdMs);
  c.send({ type: 'generate', request: REQUEST, ...(decode === undefined ? {} : { decode_chunk_frames: decode }) });
  c.send({ type: 'credit', frames: 16 });
  await c.waitJson('end');
  return c;
}

/** Checks the stream holds frames 0..8 once each, and the MP4 they form has 9 frames. */
function expectWholeVideo(c: StreamClient, name: string): void {
  expect(c.json('frame').map((f) => f.pts)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  expect(c.json('end')[0]).toEqual({ type: 'end', frames: 9, reason: 'completed' });
  const file = path.join(dir, `${name}.mp4`);
  writeFileSync(file, Buffer.concat(c.binaries()));
  expect(probeVideo(file)).toMatchObject({ codec_name: 'h264', width: 32, height: 32, nb_read_frames: '9' });
}

describe('progressive generation over /v1/stream', () => {
  it('by default the init segment and first fragment arrive before the request’s final event; the MP4 holds every frame once', async () => {
    fragmentBeforeFinal.length = 0;
    const c = await generate(undefined, 30_000);
    expect(fragmentBeforeFinal).toEqual([true]);
    expectWholeVideo(c, 'progressive');
    expect(c.binaries()[0]!.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect(c.binaries()[1]!.subarray(4, 8).toString('latin1')).toBe('moof');
    expect((await c.closed).code).toBe(1000);
  });

  it('chunks of 4 frames (the last one short): the final event adds only the frames not already sent', async () => {
    fragmentBeforeFinal.length = 0;
    const c = await generate(4, 30_000);
    expect(fragmentBeforeFinal).toEqual([true]);
    expectWholeVideo(c, 'chunks-of-4');
  });

  it('decode_chunk_frames 0 (the baseline: decode the whole clip, then send): nothing arrives before final', async () => {
    fragmentBeforeFinal.length = 0;
    const c = await generate(0, 1_500);
    expect(fragmentBeforeFinal).toEqual([false]);
    expectWholeVideo(c, 'whole-clip');
  });

  it('a bad decode_chunk_frames is refused naming the field; the connection takes another start', async () => {
    const c = await StreamClient.connect(server.origin);
    for (const bad of [-1, 1.5, 257, '2']) {
      c.send({ type: 'generate', request: REQUEST, decode_chunk_frames: bad });
      expect(await c.waitJson('error', (e) => e.param === 'decode_chunk_frames' && c.json('error').length > 0)).toMatchObject({
        code: 'invalid_message',
        fatal: false,
      });
      c.received.length = 0;
    }
    holdFinal = () => Promise.resolve();
    c.send({ type: 'generate', request: REQUEST, decode_chunk_frames: 3 });
    c.send({ type: 'credit', frames: 16 });
    await c.waitJson('end');
    expect(c.json('frame')).toHaveLength(9);
  });
});
