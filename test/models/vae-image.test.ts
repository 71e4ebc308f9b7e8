/**
 * Image-to-world conditioning: `VaeEncoder.encodeImage` turns one RGB24 image into the normalised latent mean
 * `[zDim, 1, h, w]` that `VaeDecoder` (and a decode stream's first chunk) takes. Weights: the tiny model's seeded
 * VAE (test/fixtures/reference: encoder from `causal/vae_encoder.safetensors`, decoder from `model/vae.safetensors`,
 * zDim 4, channels [8, 4], scale 2, kt 3).
 */
import * as path from 'node:path';
import { VaeConfigSchema } from '../../src/models/vae/config';
import { VaeDecoder, vaeDecoderParams } from '../../src/models/vae/decoder';
import { fromRgb24, vaeEncodedSize, VaeEncoder, vaeEncoderParams } from '../../src/models/vae/encoder';
import { WeightStore } from '../../src/models/weights/weight-store';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { Rng } from '../../src/util/rng';
import { readJson, REFERENCE_DIR, TensorPool } from '../helpers/fixtures';

const config = VaeConfigSchema.parse(readJson<{ vae: unknown }>(REFERENCE_DIR, 'model', 'model.json').vae);

/** A `width × height` RGB24 image: a seeded pattern, or one flat colour when `flat` is given. */
function image(width: number, height: number, flat?: [number, number, number]): Uint8Array {
  const rgb = new Uint8Array(width * height * 3);
  const rng = new Rng(5);
  for (let i = 0; i < rgb.length; i++) rgb[i] = flat !== undefined ? flat[i % 3] : Math.floor(rng.uniform() * 256);
  return rgb;
}

describe('VaeEncoder.encodeImage (image-to-world conditioning)', () => {
  let native: NativeBinding;
  let encStore: WeightStore;
  let decStore: WeightStore;
  let encoder: VaeEncoder;
  let decoder: VaeDecoder;
  const pool = new TensorPool(() => native);
  const tensor = pool.tensor;
  const z = config.zDim;

  beforeAll(async () => {
    native = loadNative();
    encStore = await WeightStore.open(native, path.join(REFERENCE_DIR, 'causal', 'vae_encoder.safetensors'), vaeEncoderParams(config));
    decStore = await WeightStore.open(native, path.join(REFERENCE_DIR, 'model', 'vae.safetensors'), vaeDecoderParams(config));
    encoder = new VaeEncoder(native, config, encStore);
    decoder = new VaeDecoder(native, config, decStore);
  });

  afterEach(() => pool.disposeAll());

  afterAll(() => {
    encoder?.dispose();
    decoder?.dispose();
    encStore?.dispose();
    decStore?.dispose();
  });

  it('maps RGB24 to [−1, 1]', () => {
    expect(Array.from(fromRgb24(Uint8Array.of(0, 255, 51)))).toEqual([-1, 1, Math.fround(51 / 127.5 - 1)]);
  });

  it('returns the one-frame latent mean [zDim, 1, h, w] of the encoder, which decodes to [1, h·s, w·s, 3]', async () => {
    const [W, H] = [12, 9]; // odd height: latent ⌊9/2⌋ = 4
    const rgb = image(W, H);
    const latent = await encoder.encodeImage(rgb, W, H);
    const { height: h, width: w } = vaeEncodedSize(config, H, W);
    expect([h, w]).toEqual([4, 6]);
    expect(latent).toHaveLength(z * h * w);
    const direct = tensor([1, z, 1, h, w]);
    await encoder.encode(tensor([1, H, W, 3], fromRgb24(rgb)), direct, { frames: 1, height: H, width: W });
    expect(latent).toEqual(direct.data);
    const s = decoder.scaleFactor;
    const out = tensor([1, h * s, w * s, 3]);
    await decoder.decode(tensor([1, z, 1, h, w], latent), out, { frames: 1, height: h, width: w });
    expect(out.data.every(Number.isFinite)).toBe(true);
    expect(Math.max(...out.data.map(Math.abs))).toBeGreaterThan(0);
  });

  it('rejects invalid sizes and buffer lengths, naming the field', async () => {
    await expect(encoder.encodeImage(image(4, 4), 0, 4)).rejects.toThrow(/width must be an integer ≥ 1, got 0/);
    await expect(encoder.encodeImage(image(4, 4), 4, 2.5)).rejects.toThrow(/height must be an integer ≥ 1, got 2.5/);
    await expect(encoder.encodeImage(new Uint8Array(10), 4, 4)).rejects.toThrow(/rgb has 10 bytes, expected width · height · 3 = 48/);
    await expect(encoder.encodeImage(image(1, 1), 1, 1)).rejects.toThrow(/1×1 is too small for 1 downsamplers/);
  });

  it('conditions the first chunk of a decode stream seamlessly (a flat-colour image, then 3 generated frames)', async () => {
    const [W, H] = [10, 8];
    const { height: h, width: w } = vaeEncodedSize(config, H, W);
    const first = await encoder.encodeImage(image(W, H, [200, 40, 90]), W, H);
    const F = 4;
    const hw = h * w;
    const rest = new Rng(9).fillNormal(new Float32Array(z * (F - 1) * hw), 1);
    const all = new Float32Array(z * F * hw); // [1, z, F, h, w]: frame 0 is the image
    for (let c = 0; c < z; c++) {
      all.set(first.subarray(c * hw, (c + 1) * hw), c * F * hw);
      all.set(rest.subarray(c * (F - 1) * hw, (c + 1) * (F - 1) * hw), (c * F + 1) * hw);
    }
    const s = decoder.scaleFactor;
    const oneShot = tensor([F, h * s, w * s, 3]);
    await decoder.decode(tensor([1, z, F, h, w], all), oneShot, { frames: F, height: h, width: w });

    const stream = pool.track(decoder.createStream({ frames: 1, height: h, width: w }));
    const lat = tensor(stream.latentShape);
    const rgb = tensor(stream.outputShape);
    const frame = rgb.numel;
    for (let f = 0; f < F; f++) {
      for (let c = 0; c < z; c++) lat.data.set(all.subarray((c * F + f) * hw, (c * F + f + 1) * hw), c * hw);
      await stream.decode(lat, rgb);
      expect(rgb.data).toEqual(oneShot.data.subarray(f * frame, (f + 1) * frame));
    }
  });
});
