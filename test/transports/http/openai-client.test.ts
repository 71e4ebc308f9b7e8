import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import OpenAI from 'openai';
import { PNG } from 'pngjs';
import type { VideoObject } from '../../../transports/http/jobs';
import { expectH264Mp4 } from '../../media/helpers';
import { readSse, startServer, type SseEvent, type TestServer } from './helpers';

const API_KEY = 'test-key-123';
let server: TestServer;
let client: OpenAI;
let outDir: string;

beforeAll(async () => {
  server = await startServer({ apiKey: API_KEY });
  client = new OpenAI({ apiKey: API_KEY, baseURL: `${server.origin}/v1`, maxRetries: 0 });
  outDir = mkdtempSync(path.join(tmpdir(), 'omnirx-http-test-'));
});

afterAll(async () => {
  await server.app.close();
  rmSync(outDir, { recursive: true, force: true });
});

/** `videos.create` with the extension fields (num_frames, fps, …) and sizes the client's types do not list. */
const createVideo = (body: Record<string, unknown>): Promise<VideoObject> =>
  client.videos.create(body as unknown as OpenAI.Videos.VideoCreateParams) as unknown as Promise<VideoObject>;

/** Polls `retrieve` until the job leaves queued/in_progress (no time bound: jest's own timeout applies). */
async function pollDone(id: string): Promise<OpenAI.Videos.Video> {
  for (;;) {
    const v = await client.videos.retrieve(id);
    if (v.status === 'completed' || v.status === 'failed') return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the official openai client against omnirx serve', () => {
  it('creates a video job (multipart, seconds as a string), polls it to completed and downloads an MP4 that ffprobe validates', async () => {
    // 16x8, 1 s at 6 fps = 6 frames; the extra fields ride along in the multipart form.
    const created = await createVideo({
      prompt: 'a red ball in a blue room',
      model: 'tiny',
      seconds: '1',
      size: '16x8',
      fps: 6,
      num_inference_steps: 2,
      seed: 11,
    });
    expect(created).toMatchObject({
      object: 'video',
      model: 'tiny',
      size: '16x8',
      seconds: '1',
      num_frames: 6,
      fps: 6,
      num_inference_steps: 2,
      seed: 11,
      guidance_scale: 4,
      guidance_interval: [0, 1],
      eta: 0,
      error: null,
    });
    expect(created.id).toMatch(/^video_[0-9a-f]{32}$/);
    expect(['queued', 'in_progress', 'completed']).toContain(created.status);

    const done = await pollDone(created.id);
    expect(done).toMatchObject({ id: created.id, status: 'completed', progress: 100, size: '16x8', seconds: '1', num_frames: 6, fps: 6 });
    expect(done.completed_at).toEqual(expect.any(Number));
    expect(done.completed_at!).toBeGreaterThanOrEqual(done.created_at);

    const res = await client.videos.downloadContent(created.id);
    expect(res.headers.get('content-type')).toBe('video/mp4');
    const file = path.join(outDir, 'a.mp4');
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    expectH264Mp4(file, { width: 16, height: 8, frames: 6, fps: 6 });
  });

  it('an explicit num_frames wins over seconds × fps, and the MP4 duration is frames / fps', async () => {
    const created = await createVideo({ prompt: 'a blue ball', seconds: '4', num_frames: 5, fps: 5, size: '8x8', num_inference_steps: 1, guidance_scale: 1 });
    expect(created).toMatchObject({ num_frames: 5, fps: 5, seconds: '1', size: '8x8', guidance_scale: 1, model: 'tiny' });
    expect(created.seed).toEqual(expect.any(Number));
    expect((await pollDone(created.id)).status).toBe('completed');
    const file = path.join(outDir, 'b.mp4');
    writeFileSync(file, Buffer.from(await (await client.videos.downloadContent(created.id)).arrayBuffer()));
    expectH264Mp4(file, { width: 8, height: 8, frames: 5, fps: 5 });
  });

  it('guidance_interval (a multipart "start,end" field) guides only its steps, and the job reports the interval used', async () => {
    const created = await createVideo({ prompt: 'a red ball', seconds: '1', size: '8x8', fps: 2, num_inference_steps: 4, seed: 5, guidance_interval: '0,0.5' });
    expect(created).toMatchObject({ guidance_scale: 4, guidance_interval: [0, 0.5] });
    const done = await pollDone(created.id);
    expect(done.status).toBe('completed');
    const full = await createVideo({ prompt: 'a red ball', seconds: '1', size: '8x8', fps: 2, num_inference_steps: 4, seed: 5 });
    await pollDone(full.id);
    const bytesOf = async (id: string) => Buffer.from(await (await client.videos.downloadContent(id)).arrayBuffer());
    expect((await bytesOf(created.id)).equals(await bytesOf(full.id))).toBe(false);
  });

  it('eta (a multipart number) re-noises the Euler steps: the job reports it, and the same seed gives the same video', async () => {
    const body = { prompt: 'a red ball', seconds: '1', size: '8x8', fps: 2, num_inference_steps: 3, seed: 6 };
    const noisy = await createVideo({ ...body, eta: 1 });
    expect(noisy).toMatchObject({ sampler: 'euler', eta: 1 });
    const again = await createVideo({ ...body, eta: 1 });
    const plain = await createVideo(body);
    expect(plain).toMatchObject({ eta: 0 });
    for (const j of [noisy, again, plain]) expect((await pollDone(j.id)).status).toBe('completed');
    const bytesOf = async (id: string) => Buffer.from(await (await client.videos.downloadContent(id)).arrayBuffer());
    expect((await bytesOf(noisy.id)).equals(await bytesOf(again.id))).toBe(true);
    expect((await bytesOf(noisy.id)).equals(await bytesOf(plain.id))).toBe(false);
  });

  it('lists jobs newest first', async () => {
    const page = await client.videos.list();
    const ids = page.data.map((v) => v.id);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    const created = page.data.map((v) => v.created_at);
    expect([...created].sort((a, b) => b - a)).toEqual(created);
    const fresh = await createVideo({ prompt: 'a room', size: '8x8', num_inference_steps: 1 });
    expect((await client.videos.list()).data[0]!.id).toBe(fresh.id);
    await pollDone(fresh.id);
  });

  it('deleting a job mid-run cancels it: its step events stop, it is gone, and the engine serves the next job', async () => {
    // 40x40 × 40 frames (4000 latent tokens) × 50 steps: long enough on the tiny model that the first step event arrives mid-run.
    const job = await createVideo({ prompt: 'a long red ball', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 });
    let deleted: OpenAI.Videos.VideoDeleteResponse | undefined;
    const sse = await readSse(`${server.origin}/v1/videos/${job.id}/events`, {
      headers: { authorization: `Bearer ${API_KEY}` },
      onEvent: async (e: SseEvent) => {
        if (e.event === 'step' && deleted === undefined) deleted = await client.videos.delete(job.id);
      },
    });
    expect(deleted).toEqual({ id: job.id, object: 'video.deleted', deleted: true });
    const types = sse.events.map((e) => e.event);
    // The stream ends with `cancelled`, carrying how many steps ran; no step event comes after it and fewer than all 50 ran.
    expect(types.at(-1)).toBe('cancelled');
    expect(types).not.toContain('final');
    const steps = sse.events.filter((e) => e.event === 'step');
    const cancelled = sse.events.at(-1)!.data;
    expect(cancelled.completedSteps).toBe(steps.length);
    expect(steps.length).toBeLessThan(50);
    await expect(client.videos.retrieve(job.id)).rejects.toMatchObject({ status: 404 });
    expect(server.app.omnirx.jobs.get(job.id)).toBeUndefined();
    // The engine freed the slot: the next job completes, and the cancelled one never reappears in the list.
    const next = await createVideo({ prompt: 'after', size: '8x8', num_inference_steps: 1 });
    expect((await pollDone(next.id)).status).toBe('completed');
    expect((await client.videos.list()).data.map((v) => v.id)).not.toContain(job.id);
  });

  it('generates an image as a b64 PNG of the requested size', async () => {
    const res = await client.images.generate({ prompt: 'a red ball', size: '16x8' as '256x256', response_format: 'b64_json', n: 1 });
    expect(res.data).toHaveLength(1);
    const png = PNG.sync.read(Buffer.from(res.data![0]!.b64_json!, 'base64'));
    expect([png.width, png.height]).toEqual([16, 8]);
  });

  it('lists the models and retrieves one; an unknown id is a 404 naming model', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    expect(models).toEqual([{ id: 'tiny', object: 'model', created: expect.any(Number), owned_by: 'omnirx' }]);
    expect(await client.models.retrieve('tiny')).toEqual(models[0]);
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404, error: { param: 'model', code: 'not_found' } });
  });

  it('rejects a value the model cannot honour with 400 naming the field', async () => {
    // 10 is not a multiple of the tiny model's pixel stride (4).
    await expect(createVideo({ prompt: 'x', size: '10x8' })).rejects.toMatchObject({
      status: 400,
      error: { type: 'invalid_request_error', param: 'size', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' },
    });
  });
});
