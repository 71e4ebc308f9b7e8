/**
 * Progressive T2V decode (`outputs.decodeChunkFrames`): the `decode_video` node decodes the final latents a few
 * frames at a time with the causal VAE's streaming state and emits each group as a `chunk` event (a `video`
 * artifact with `decoded: { firstFrame, totalFrames }`) before `final`. The pixels must equal the one-shot decode:
 * the causal convs carry their last kt − 1 input frames across chunks and every other op is per pixel, so the float32
 * outputs are bitwise equal (test/models/vae-stream.test.ts asserts that at the decoder level); here the RGB24 bytes of
 * the chunks, the final video and a run without the option are compared byte for byte, for chunk sizes that divide
 * the clip and ones that leave a short (zero-padded) last chunk.
 */
import * as path from 'node:path';
import { lastValueFrom, Subject, takeUntil, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import { loadNative } from '../../src/native/binding';
import { TopologySchema } from '../../src/placement/topology';
import type { ChunkEvent, OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { finalOf } from '../helpers/events';
import { settledBytesInUse } from '../helpers/native-memory';
import { makeModelsDir } from '../helpers/tiny-model';

const native = loadNative();
// Stage processes run compiled JS (`npm test` builds dist/ first).
const STAGE_ENTRY = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');
let modelsDir: string;
let engine: Engine;

const FRAMES = 9;
const req = (decodeChunkFrames?: number, extra: Partial<OmniRequestInput> = {}): OmniRequestInput => ({
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball in a blue room' },
  diffusion: { seed: 7, numFrames: FRAMES, numInferenceSteps: 2, width: 16, height: 12 },
  ...(decodeChunkFrames === undefined ? {} : { outputs: { decodeChunkFrames } }),
  ...extra,
});

const run = (e: Engine, r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(e.generate(r).pipe(toArray()));
const chunksOf = (events: OmniEvent[]) => events.filter((e): e is ChunkEvent => e.type === 'chunk');
const videoBytes = (events: OmniEvent[]): Buffer => {
  const v = finalOf(events).artifacts.video;
  if (v.kind !== 'video') throw new Error('expected a video');
  return Buffer.from(v.frames);
};

beforeAll(async () => {
  modelsDir = await makeModelsDir();
  engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', native });
});

afterAll(async () => {
  await engine.close();
});

describe('outputs.decodeChunkFrames (progressive T2V decode)', () => {
  let oneShot: Buffer;
  beforeAll(async () => {
    const events = await run(engine, req());
    expect(chunksOf(events)).toEqual([]);
    oneShot = videoBytes(events);
  });

  it.each([1, 2, 3, 4, 8, FRAMES, 64])('chunks of %i: contiguous chunk events before final, their bytes equal to the one-shot decode', async (n) => {
    const events = await run(engine, req(n));
    const chunks = chunksOf(events);
    expect(chunks).toHaveLength(Math.ceil(FRAMES / Math.min(n, FRAMES)));
    let next = 0;
    for (const c of chunks) {
      expect(c.node).toBe('decode_video');
      expect(c.rollout).toBeUndefined();
      expect(c.decoded).toEqual({ firstFrame: next, totalFrames: FRAMES });
      expect(c.artifact).toMatchObject({ kind: 'video', width: 16, height: 12, fps: expect.any(Number) });
      if (c.artifact.kind !== 'video') throw new Error('expected a video chunk');
      expect(c.artifact.numFrames).toBe(Math.min(n, FRAMES - next));
      expect(c.artifact.frames.length).toBe(c.artifact.numFrames * 16 * 12 * 3);
      next += c.artifact.numFrames;
    }
    expect(next).toBe(FRAMES);
    // Every chunk follows the last denoise step and precedes the node's end and the final event.
    const types = events.map((e) => (e.type === 'node_end' || e.type === 'node_start' ? `${e.type}:${e.node}` : e.type));
    const firstChunk = types.indexOf('chunk');
    expect(firstChunk).toBeGreaterThan(types.lastIndexOf('step'));
    expect(firstChunk).toBeGreaterThan(types.indexOf('node_start:decode_video'));
    expect(types.lastIndexOf('chunk')).toBeLessThan(types.indexOf('node_end:decode_video'));
    expect(types[types.length - 1]).toBe('final');
    const joined = Buffer.concat(chunks.map((c) => (c.artifact.kind === 'video' ? Buffer.from(c.artifact.frames) : Buffer.alloc(0))));
    expect(joined.equals(oneShot)).toBe(true);
    expect(videoBytes(events).equals(oneShot)).toBe(true);
  });

  it('the admitted event echoes the chunk size; 0 is the one-shot decode (no chunk events, no echo)', async () => {
    const on = await run(engine, req(2));
    const admitted = on.find((e) => e.type === 'admitted');
    expect(admitted?.type === 'admitted' && admitted.params.decodeChunkFrames).toBe(2);
    const off = await run(engine, req(0));
    expect(chunksOf(off)).toEqual([]);
    const a0 = off.find((e) => e.type === 'admitted');
    expect(a0?.type === 'admitted' && 'decodeChunkFrames' in a0.params).toBe(false);
    expect(videoBytes(off).equals(oneShot)).toBe(true);
  });

  it('T2I ignores it (one frame, decoded once)', async () => {
    const events = await run(engine, {
      model: 'tiny',
      task: 'T2I',
      inputs: { prompt: 'a red room' },
      diffusion: { seed: 5 },
      outputs: { decodeChunkFrames: 1 },
    });
    expect(chunksOf(events)).toEqual([]);
    expect(finalOf(events).artifacts.image?.kind).toBe('image');
  });

  it('a bad value is one error event naming outputs.decodeChunkFrames', async () => {
    for (const bad of [-1, 1.5, 100_000]) {
      const events = await run(engine, req(bad));
      expect(events).toEqual([expect.objectContaining({ type: 'error', param: 'outputs.decodeChunkFrames' })]);
    }
  });

  it('unsubscribing after the first chunk stops the decode and gives every native byte back', async () => {
    await run(engine, req(1)); // plans and weights loaded
    const base = await settledBytesInUse(native);
    const stop = new Subject<void>();
    const seen: OmniEvent[] = [];
    await new Promise<void>((resolve) => {
      engine
        .generate(req(1))
        .pipe(takeUntil(stop))
        .subscribe({
          next: (e) => {
            seen.push(e);
            if (e.type === 'chunk') stop.next();
          },
          complete: resolve,
        });
    });
    expect(chunksOf(seen)).toHaveLength(1);
    expect(seen.some((e) => e.type === 'final')).toBe(false);
    expect(await settledBytesInUse(native)).toBe(base);
  });
});

describe('on disaggregated stages', () => {
  it.each(['in-process', 'shm'] as const)(
    'over %s: the Decode stage sends its decoded chunks to the front ahead of the result, the same bytes as in process',
    async (connector) => {
      if (connector === 'shm' && process.env.OMNIRX_TEST_ALL !== '1') return; // stage processes: test:all only (dist/)
      const topology = TopologySchema.parse({ kind: 'disaggregated', connector });
      const staged = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', native, topology, stageEntry: STAGE_ENTRY });
      try {
        const mono = await run(engine, req(2));
        const events = await run(staged, req(2));
        expect(videoBytes(events).equals(videoBytes(mono))).toBe(true);
        const strip = (c: ChunkEvent) => ({
          node: c.node,
          decoded: c.decoded,
          artifact: { ...c.artifact, frames: Buffer.from((c.artifact as { frames: Uint8Array }).frames) },
        });
        expect(chunksOf(events).map(strip)).toEqual(chunksOf(mono).map(strip));
        expect(chunksOf(events).map((c) => c.decoded?.firstFrame)).toEqual([0, 2, 4, 6, 8]);
        // every chunk before the result
        expect(events.findIndex((e) => e.type === 'final')).toBeGreaterThan(events.map((e) => e.type).lastIndexOf('chunk'));
      } finally {
        await staged.close();
      }
    },
  );
});
