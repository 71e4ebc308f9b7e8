/**
 * fMP4 and raw H.264 over WebSocket (`/v1/stream`) for generations, with a Node `ws` client against a listening
 * server on the tiny model: the concatenated init segment and fragments form an MP4 that ffprobe validates, raw
 * H.264 decodes with ffmpeg, credits gate every frame, and hostile messages get errors naming the field while the
 * server keeps serving.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { startServer, type TestServer } from '../http/helpers';
import { makeModelsDir, poisonToOverflow, tinySpec } from '../../helpers/tiny-model';
import { probeVideo } from '../../helpers/ffprobe';
import { StreamClient } from './stream-client';

let server: TestServer;
const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-ws-'));

beforeAll(async () => {
  const modelsDir = await makeModelsDir([{ spec: tinySpec('poisoned'), seed: 2 }]);
  poisonToOverflow(modelsDir, 'poisoned');
  server = await startServer({ modelsDir });
});

afterAll(async () => {
  await server.app.close();
});

const REQUEST = { prompt: 'a red ball', size: '32x32', num_frames: 9, fps: 8, num_inference_steps: 2, seed: 7 };

/** Runs one generation to its end, granting `credits` up front and one more per fragment received. */
async function generate(format: 'fmp4' | 'h264', credits = 2): Promise<StreamClient> {
  const c = await StreamClient.connect(server.origin);
  c.send({ type: 'generate', format, request: REQUEST });
  c.send({ type: 'credit', frames: credits });
  c.ws.on('message', (_d, isBinary) => {
    if (isBinary && c.binaries().length > (format === 'fmp4' ? 1 : 0)) c.send({ type: 'credit', frames: 1 });
  });
  await c.waitJson('end');
  return c;
}

describe('generation over /v1/stream', () => {
  it('fMP4: init message and segment, then per frame a frame message and one moof+mdat; ffprobe counts frames, fps and size', async () => {
    const c = await generate('fmp4');
    const order = c.received
      .map((m) => (m.kind === 'binary' ? 'bin' : (m.data.type as string)))
      .filter((t) => t !== 'queued' && t !== 'progress' && t !== 'admitted');
    expect(order).toEqual(['init', 'bin', ...Array.from({ length: 9 }, () => ['frame', 'bin']).flat(), 'end']);
    expect(c.json('init')[0]).toMatchObject({ type: 'init', format: 'fmp4', width: 32, height: 32, fps: 8 });
    expect(c.json('init')[0]!.codec).toMatch(/^avc1\.[0-9A-F]{6}$/);
    expect(c.json('frame').map((f) => f.pts)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(c.json('frame').map((f) => f.ptsMs)).toEqual([0, 125, 250, 375, 500, 625, 750, 875, 1000]);
    expect(c.json('frame')[0]).toMatchObject({ keyframe: true, chunk: null, action: null });
    expect(c.json('progress').map((p) => [p.step, p.total])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    expect(c.json('end')[0]).toEqual({ type: 'end', frames: 9, reason: 'completed' });
    const bins = c.binaries();
    expect(bins[0]!.subarray(4, 8).toString('latin1')).toBe('ftyp');
    for (const [i, b] of bins.slice(1).entries()) {
      expect(b.subarray(4, 8).toString('latin1')).toBe('moof');
      expect(b.length).toBe(c.json('frame')[i]!.bytes);
    }
    const file = path.join(dir, 'gen.mp4');
    writeFileSync(file, Buffer.concat(bins));
    expect(probeVideo(file)).toMatchObject({ codec_name: 'h264', width: 32, height: 32, r_frame_rate: '8/1', nb_read_frames: '9' });
    expect((await c.closed).code).toBe(1000);
  });

  it('raw H.264: Annex-B access units (SPS and PPS before the keyframe) that ffmpeg decodes to 9 frames', async () => {
    const c = await generate('h264');
    expect(c.json('init')[0]).toMatchObject({ format: 'h264', width: 32, height: 32, fps: 8 });
    const bins = c.binaries();
    expect(bins).toHaveLength(9);
    expect([...bins[0]!.subarray(0, 5)]).toEqual([0, 0, 0, 1, 0x67]); // start code + SPS
    const file = path.join(dir, 'gen.h264');
    writeFileSync(file, Buffer.concat(bins));
    const raw = execFileSync('ffmpeg', ['-v', 'error', '-f', 'h264', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { maxBuffer: 1 << 24 });
    expect(raw.length).toBe(9 * 32 * 32 * 3);
  });

  it('credits gate frames: with 3 credits and no more grants exactly 3 fragments arrive; a grant releases the rest', async () => {
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'generate', request: REQUEST });
    c.send({ type: 'credit', frames: 3 });
    await c.waitBinaries(4); // init segment + 3 fragments
    // Every frame of a generation is in memory once it finished: the rest waits for credits only. Probe the socket
    // with a message the server answers in order: anything sent before the answer was already on its way.
    c.send({ type: 'flush' });
    await c.waitJson('error', (e) => e.code === 'not_started');
    expect(c.binaries()).toHaveLength(4);
    expect(c.json('frame')).toHaveLength(3);
    c.send({ type: 'credit', frames: 6 });
    await c.waitJson('end');
    expect(c.binaries()).toHaveLength(10);
  });

  it('the client closing the socket mid-stream cancels the generation; the server keeps serving', async () => {
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'generate', request: { ...REQUEST, num_inference_steps: 50 } });
    await c.waitJson('progress');
    c.ws.close();
    await c.closed;
    // The engine stops the request at its next step: /ready reports nothing running any more.
    while (((await (await fetch(`${server.origin}/ready`)).json()) as { running: number }).running > 0) await new Promise((r) => setImmediate(r));
    const d = await generate('fmp4', 9);
    expect(d.json('end')[0]).toMatchObject({ frames: 9 });
  });
});

describe('hostile input on /v1/stream', () => {
  const cases: Array<[string, unknown, { code: string; param: string | null }]> = [
    ['malformed JSON', '{"type": "generate",', { code: 'invalid_json', param: null }],
    ['a JSON array', '[1, 2]', { code: 'invalid_message', param: null }],
    ['an unknown type', { type: 'launch' }, { code: 'invalid_message', param: 'type' }],
    ['a type of the wrong type', { type: 42 }, { code: 'invalid_message', param: 'type' }],
    ['an unknown field', { type: 'generate', request: { prompt: 'a' }, extra: 1 }, { code: 'invalid_message', param: 'extra' }],
    ['an unknown request field', { type: 'generate', request: { prompt: 'a', colour: 'red' } }, { code: 'invalid_message', param: 'request.colour' }],
    // Previews go to a job's SSE stream; this stream carries the video only, so the field is refused, not ignored.
    ['preview_every', { type: 'generate', request: { prompt: 'a', preview_every: 2 } }, { code: 'invalid_message', param: 'request.preview_every' }],
    ['a bad size', { type: 'generate', request: { prompt: 'a', size: 'big' } }, { code: 'invalid_message', param: 'request.size' }],
    ['num_frames as a string', { type: 'generate', request: { prompt: 'a', num_frames: '9' } }, { code: 'invalid_message', param: 'request.num_frames' }],
    [
      'a reversed guidance interval',
      { type: 'generate', request: { prompt: 'a', guidance_interval: [0.75, 0.25] } },
      { code: 'invalid_message', param: 'request.guidance_interval' },
    ],
    [
      'a guidance interval past 1',
      { type: 'generate', request: { prompt: 'a', guidance_interval: [0, 7] } },
      { code: 'invalid_message', param: 'request.guidance_interval.1' },
    ],
    ['an eta past 1', { type: 'generate', request: { prompt: 'a', eta: 3 } }, { code: 'invalid_message', param: 'request.eta' }],
    ['an eta as a string', { type: 'generate', request: { prompt: 'a', eta: '0.5' } }, { code: 'invalid_message', param: 'request.eta' }],
    ['an unknown format', { type: 'generate', format: 'webm', request: { prompt: 'a' } }, { code: 'invalid_message', param: 'format' }],
    ['a credit of 0', { type: 'credit', frames: 0 }, { code: 'invalid_message', param: 'frames' }],
    ['a fractional credit', { type: 'credit', frames: 1.5 }, { code: 'invalid_message', param: 'frames' }],
    ['an action key of the wrong kind', { type: 'action', key: 'jump' }, { code: 'invalid_message', param: 'key' }],
    ['an action before any session', { type: 'action', key: 'up' }, { code: 'not_started', param: 'type' }],
    ['a credit before any stream', { type: 'credit', frames: 1 }, { code: 'not_started', param: 'type' }],
    ['a flush before any session', { type: 'flush' }, { code: 'not_started', param: 'type' }],
    [
      'a size the model cannot take',
      { type: 'generate', request: { prompt: 'a', size: '30x30' } },
      { code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'request.size' },
    ],
    ['an unknown model', { type: 'generate', request: { prompt: 'a', model: 'nope' } }, { code: 'OMNIRX_ERR_UNKNOWN_MODEL', param: 'request.model' }],
  ];

  it('answers each bad message with an error naming the field and keeps the connection serving', async () => {
    const c = await StreamClient.connect(server.origin);
    for (const [what, message, expected] of cases) {
      const before = c.json('error').length;
      c.send(message);
      const err = await c.wait(() => c.json('error').length > before).then(() => c.json('error')[before]!);
      expect({ what, code: err.code, param: err.param, fatal: err.fatal }).toEqual({ what, ...expected, fatal: false });
      expect(typeof err.message).toBe('string');
    }
    c.ws.send(Buffer.from([0xde, 0xad, 0xbe, 0xef]));
    expect(await c.waitJson('error', (e) => /binary/.test(String(e.message)))).toMatchObject({ code: 'invalid_message', fatal: false });
    // Still serving on the same connection: a valid generation runs; a second start is refused.
    c.send({ type: 'generate', request: REQUEST });
    c.send({ type: 'generate', request: REQUEST });
    expect(await c.waitJson('error', (e) => e.code === 'already_started')).toMatchObject({ param: 'type', fatal: false });
    c.send({ type: 'credit', frames: 64 });
    // 65 more exceed the 64 a client may hold whatever frames were spent in between (with 1 more, a stream that sent
    // its frames before this message arrived would leave room for it, and no error would come).
    c.send({ type: 'credit', frames: 65 });
    expect(await c.waitJson('error', (e) => e.param === 'frames' && /64 credits/.test(String(e.message)))).toMatchObject({
      code: 'invalid_message',
      fatal: false,
    });
    expect(await c.waitJson('end')).toMatchObject({ frames: 9, reason: 'completed' });
  });

  it('an error echoes the id of the message it answers (replyTo), so pipelined messages can be told apart', async () => {
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'credit', id: 'c1', frames: 1 });
    c.send({ type: 'flush', id: 'f1' });
    c.send({ type: 'credit', id: 'c2', frames: 0 });
    c.send({ type: 'launch', id: 'l1' });
    c.send({ type: 'flush', id: 7 });
    c.send({ type: 'flush', id: 'x'.repeat(65) });
    c.send('{"type": "flush", "id": "j1"'); // not JSON: no id can be read
    c.send({ type: 'generate', id: 'g1', request: { prompt: 'a', size: '30x30' } });
    await c.wait(() => c.json('error').length >= 8);
    expect(c.json('error').map((e) => [e.replyTo, e.param])).toEqual([
      ['c1', 'type'],
      ['f1', 'type'],
      ['c2', 'frames'],
      ['l1', 'type'],
      [null, 'id'],
      [null, 'id'],
      [null, null],
      ['g1', 'request.size'],
    ]);
    // The refused start can be followed by another, whose errors answer the new id.
    c.send({ type: 'generate', id: 'g2', request: REQUEST });
    c.send({ type: 'generate', id: 'g3', request: REQUEST });
    expect(await c.waitJson('error', (e) => e.code === 'already_started')).toMatchObject({ replyTo: 'g3' });
    c.send({ type: 'credit', frames: 9 });
    expect(await c.waitJson('end')).toMatchObject({ frames: 9, reason: 'completed' });
  });

  it('a message over 1 MiB closes that connection with 1009; a failure after admission is a fatal error; others are unaffected', async () => {
    const big = await StreamClient.connect(server.origin);
    big.send({ type: 'generate', request: { prompt: 'x'.repeat(2 ** 20 + 10) } });
    expect((await big.closed).code).toBe(1009);
    const c = await StreamClient.connect(server.origin);
    c.send({ type: 'generate', id: 'start-1', request: { ...REQUEST, model: 'poisoned' } });
    c.send({ type: 'credit', frames: 9 });
    const err = await c.waitJson('error');
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_NON_FINITE', fatal: true, replyTo: 'start-1' });
    expect(c.json('admitted')).toHaveLength(1);
    expect((await c.closed).code).toBe(1011);
    const d = await generate('fmp4', 9);
    expect(d.json('end')[0]).toMatchObject({ frames: 9, reason: 'completed' });
  });

  it('100 rapid connects and disconnects (some mid-start), then a normal stream works', async () => {
    const url = server.origin.replace(/^http/, 'ws') + '/v1/stream';
    await Promise.all(
      Array.from(
        { length: 100 },
        (_, i) =>
          new Promise<void>((resolve) => {
            const ws = new WebSocket(url);
            ws.on('open', () => {
              if (i % 2 === 0) ws.send(JSON.stringify({ type: 'generate', request: REQUEST }));
              if (i % 3 === 0) ws.terminate();
              else ws.close();
            });
            ws.on('close', () => resolve());
            ws.on('error', () => resolve());
          }),
      ),
    );
    const d = await generate('fmp4', 9);
    expect(d.json('end')[0]).toMatchObject({ frames: 9, reason: 'completed' });
  });

  it('an unknown path is refused with 404 and a bad token with 401', async () => {
    await expect(StreamClient.connect(server.origin, '/v1/nope')).rejects.toThrow(/404/);
    const authed = await startServer({ apiKey: 'sekret' });
    try {
      await expect(StreamClient.connect(authed.origin, '/v1/stream?token=wrong')).rejects.toThrow(/401/);
      const c = await StreamClient.connect(authed.origin, '/v1/stream?token=sekret');
      c.send({ type: 'flush' });
      expect(await c.waitJson('error')).toMatchObject({ code: 'not_started' });
      c.ws.close();
    } finally {
      await authed.app.close();
    }
  });
});
