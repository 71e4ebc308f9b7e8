/**
 * Streaming (chunked) causal VAE decode: `VaeDecoder.createStream` decodes a video chunk by chunk with each causal
 * conv's last kt − 1 input frames carried to the next chunk, which must give the same frames as one decode of the
 * whole video. Models: the tiny reference model (test/fixtures/reference/model, zDim 4, channels [8, 4], kt 3) and a
 * seeded VAE of the embedded default's shape (zDim 16, channels [64, 32, 16], kt 3, latent 16×16).
 *
 * Tolerance: max relative error ≤ 1e-5. Each conv runs one im2col + GEMM per output frame and every other op is
 * per pixel, so a chunked decode performs the same float32 operations in the same order as the one-shot decode; the
 * measured difference is 0 (bitwise equal) for chunks of 1, 2 and 4 frames, which the tests assert.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { VaeConfigSchema, type VaeConfig } from '../../src/models/vae/config';
import { VaeDecoder, vaeDecoderParams } from '../../src/models/vae/decoder';
import type { VaeDecodeStream } from '../../src/models/vae/decode-stream';
import { writeSafetensors } from '../../src/models/weights/safetensors';
import { WeightStore, type ParamSpec } from '../../src/models/weights/weight-store';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { Rng } from '../../src/util/rng';
import { maxRelErr, readJson, REFERENCE_DIR, TensorPool } from '../helpers/fixtures';
import { settledBytesInUse } from '../helpers/native-memory';

const FRAMES = 8;

/** Seeded weights for `params` (normal per spec; zero biases and unit gains perturbed so every parameter matters). */
async function seededStore(native: NativeBinding, params: readonly ParamSpec[], seed: number, file: string): Promise<WeightStore> {
  const rng = new Rng(seed);
  const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of params) {
    const data = new Float32Array(p.shape.reduce((a, b) => a * b, 1));
    rng.fillNormal(data, p.init === 'normal' ? (p.std ?? 1) : 0.1);
    if (p.init === 'ones') for (let i = 0; i < data.length; i++) data[i] += 1;
    tensors[p.name] = { shape: p.shape, data };
  }
  await writeSafetensors(file, tensors);
  return WeightStore.open(native, file, params);
}

/** Frames [from, from + n) of channels-first latents [1, z, F, h, w] → [1, z, n, h, w]. */
function latentChunk(all: Float32Array, z: number, F: number, hw: number, from: number, n: number): Float32Array {
  const out = new Float32Array(z * n * hw);
  for (let c = 0; c < z; c++) out.set(all.subarray((c * F + from) * hw, (c * F + from + n) * hw), c * n * hw);
  return out;
}

interface Case {
  name: string;
  config: VaeConfig;
  height: number;
  width: number;
  open: (native: NativeBinding) => Promise<WeightStore>;
}

const referenceConfig = VaeConfigSchema.parse(readJson<{ vae: unknown }>(REFERENCE_DIR, 'model', 'model.json').vae);
const defaultShape = VaeConfigSchema.parse({ zDim: 16, channels: [64, 32, 16], numResBlocks: 1, temporalKernel: 3, latentsMean: new Array(16).fill(0.05), latentsStd: new Array(16).fill(0.9) });
const tmp = mkdtempSync(path.join(tmpdir(), 'omnirx-vae-stream-'));

const cases: Case[] = [
  { name: 'tiny reference model', config: referenceConfig, height: 4, width: 5, open: (n) => WeightStore.open(n, path.join(REFERENCE_DIR, 'model', 'vae.safetensors'), vaeDecoderParams(referenceConfig)) },
  { name: 'seeded default-shaped VAE', config: defaultShape, height: 16, width: 16, open: (n) => seededStore(n, vaeDecoderParams(defaultShape), 7, path.join(tmp, 'vae.safetensors')) },
];

describe.each(cases)('VaeDecoder.createStream ($name)', ({ config, height: h, width: w, open }) => {
  let native: NativeBinding;
  let store: WeightStore;
  let decoder: VaeDecoder;
  const pool = new TensorPool(() => native);
  const tensor = pool.tensor;
  const z = config.zDim;
  const hw = h * w;
  let latents: Float32Array;
  let oneShot: Float32Array;
  let frame: number;

  /** Decodes `chunks` consecutive chunks of `n` frames starting at frame `from` through `stream`; returns the frames. */
  async function decodeChunks(stream: VaeDecodeStream, n: number, from = 0, chunks = (FRAMES - from) / n): Promise<Float32Array> {
    const out = new Float32Array(chunks * n * frame);
    const lat = tensor([1, z, n, h, w]);
    const rgb = tensor(stream.outputShape);
    for (let i = 0; i < chunks; i++) {
      lat.data.set(latentChunk(latents, z, FRAMES, hw, from + i * n, n));
      await stream.decode(lat, rgb);
      out.set(rgb.data, i * n * frame);
    }
    return out;
  }

  beforeAll(async () => {
    native = loadNative();
    store = await open(native);
    decoder = new VaeDecoder(native, config, store);
    const s = decoder.scaleFactor;
    frame = h * s * w * s * 3;
    const rng = new Rng(11);
    latents = new Float32Array(z * FRAMES * hw);
    rng.fillNormal(latents, 1);
    const out = tensor([FRAMES, h * s, w * s, 3]);
    await decoder.decode(tensor([1, z, FRAMES, h, w], latents), out, { frames: FRAMES, height: h, width: w });
    oneShot = out.data.slice();
    pool.disposeAll();
  });

  afterEach(() => pool.disposeAll());

  afterAll(() => {
    decoder?.dispose();
    store?.dispose();
  });

  it.each([1, 2, 4])('decodes %i-frame chunks to exactly the one-shot frames', async (n) => {
    const stream = pool.track(decoder.createStream({ frames: n, height: h, width: w }));
    const chunked = await decodeChunks(stream, n);
    expect(maxRelErr(chunked, oneShot)).toBeLessThanOrEqual(1e-5);
    expect(chunked).toEqual(oneShot); // bitwise: same ops in the same order
  });

  it('differs from decoding each chunk alone (the history is really carried)', async () => {
    const stream = pool.track(decoder.createStream({ frames: 2, height: h, width: w }));
    await decodeChunks(stream, 2, 0, 1);
    stream.reset();
    const alone = await decodeChunks(stream, 2, 2, 1);
    expect(maxRelErr(alone, oneShot.subarray(2 * frame, 4 * frame))).toBeGreaterThan(1e-3);
  });

  it('reset() starts a new video: a second pass equals the first and a fresh stream', async () => {
    const stream = pool.track(decoder.createStream({ frames: 2, height: h, width: w }));
    const first = await decodeChunks(stream, 2);
    stream.reset();
    const second = await decodeChunks(stream, 2);
    const fresh = await decodeChunks(pool.track(decoder.createStream({ frames: 2, height: h, width: w })), 2);
    expect(second).toEqual(first);
    expect(fresh).toEqual(first);
  });

  it.each([1, 4])('a failed decode leaves the stream state unchanged (%i-frame chunks)', async (n) => {
    const stream = pool.track(decoder.createStream({ frames: n, height: h, width: w }));
    const head = await decodeChunks(stream, n, 0, 1);
    const rgb = tensor(stream.outputShape);
    await expect(stream.decode(tensor([1, z, n + 1, h, w]), rgb)).rejects.toThrow(/latents has shape \[1, \d+, \d+, \d+, \d+\] .* expected \[1, \d+, \d+, \d+, \d+\]/);
    await expect(stream.decode(tensor([1, z, n, h, w]), tensor([n, 1, 1, 3]))).rejects.toThrow(/out has shape/);
    const gone = tensor([1, z, n, h, w]);
    gone.dispose(); // passes the size checks, then the native run rejects it
    await expect(stream.decode(gone, rgb)).rejects.toThrow(/was disposed/);
    const tail = await decodeChunks(stream, n, n, 1);
    expect(head).toEqual(oneShot.subarray(0, n * frame));
    expect(tail).toEqual(oneShot.subarray(n * frame, 2 * n * frame));
  });

  it('rejects a second decode while one is in flight, without disturbing the first', async () => {
    const stream = pool.track(decoder.createStream({ frames: 1, height: h, width: w }));
    const lat = tensor([1, z, 1, h, w], latentChunk(latents, z, FRAMES, hw, 0, 1));
    const rgb = tensor(stream.outputShape);
    const first = stream.decode(lat, rgb);
    await expect(stream.decode(lat, tensor(stream.outputShape))).rejects.toThrow(/still decoding/);
    expect(() => stream.reset()).toThrow(/still decoding/);
    await first;
    expect(rgb.data).toEqual(oneShot.subarray(0, frame));
    expect(await decodeChunks(stream, 1, 1, 1)).toEqual(oneShot.subarray(frame, 2 * frame));
  });

  it('rejects chunk sizes that are not integers ≥ 1, naming the field', () => {
    expect(() => decoder.createStream({ frames: 0, height: h, width: w })).toThrow(/frames must be an integer ≥ 1, got 0/);
    expect(() => decoder.createStream({ frames: 1, height: 2.5, width: w })).toThrow(/height must be an integer ≥ 1, got 2.5/);
    expect(() => decoder.createStream({ frames: 1, height: h, width: -1 })).toThrow(/width must be an integer ≥ 1, got -1/);
  });

  it('dispose() frees the history buffers and the plan (bytes 0, native memory back to the baseline)', async () => {
    decoder.createStream({ frames: 2, height: h, width: w }).dispose(); // loads and packs the shared weights once
    const baseline = await settledBytesInUse(native);
    const stream = decoder.createStream({ frames: 2, height: h, width: w });
    await decodeChunks(stream, 2, 0, 2);
    pool.disposeAll();
    const s = decoder.scaleFactor;
    // A lower bound: two buffers of kt − 1 = 2 frames for conv_in (z channels) and the mid block's two convs (c0).
    const latentResHistories = 2 * 2 * hw * (z + 2 * config.channels[0]);
    expect(stream.bytes).toBeGreaterThan(latentResHistories * 4);
    expect(native.stats().bytesInUse).toBeGreaterThanOrEqual(baseline + stream.bytes);
    stream.dispose();
    expect(stream.bytes).toBe(0);
    expect(native.stats().bytesInUse).toBe(baseline);
    expect(() => stream.reset()).toThrow(/reset after dispose/);
    await expect(stream.decode(tensor([1, z, 2, h, w]), tensor([2, h * s, w * s, 3]))).rejects.toThrow(/decode after dispose/);
    stream.dispose();
  });

  it('holds native memory flat over 200 chunks', async () => {
    const stream = pool.track(decoder.createStream({ frames: 1, height: h, width: w }));
    const lat = tensor([1, z, 1, h, w]);
    const rgb = tensor(stream.outputShape);
    await stream.decode(lat, rgb);
    const before = await settledBytesInUse(native);
    const bytes = stream.bytes;
    const rng = new Rng(3);
    for (let i = 0; i < 200; i++) {
      rng.fillNormal(lat.data, 1);
      await stream.decode(lat, rgb);
    }
    expect(native.stats().bytesInUse).toBe(before);
    expect(stream.bytes).toBe(bytes);
    expect(rgb.data.every(Number.isFinite)).toBe(true);
  });
});
