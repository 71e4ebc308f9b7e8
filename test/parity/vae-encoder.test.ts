/**
 * Parity of the VAE encoder (src/models/vae/encoder.ts) with the independent PyTorch reference
 * tools/reference/causal_reference.py `WanVaeEncoder` (diffusers AutoencoderKLWan encoder blocks: WanCausalConv3d,
 * WanRMS_norm, WanResidualBlock, WanResample('downsample2d') = ZeroPad2d((0, 1, 0, 1)) + Conv2d stride 2, quant_conv).
 *
 * Fixtures (committed): test/fixtures/reference/causal/vae_encoder.safetensors (seeded encoder weights for the tiny
 * model's VAE config, biases and RMS gammas perturbed away from 0/1) and fixtures.{safetensors,json}, written by
 * tools/reference/make_causal_fixtures.py. Two videos: a [3, 4 frames, 9×12] (4 frames > temporal kernel 3; odd
 * height, so the stride-2 gather takes the odd-size path and the latent height is ⌊9/2⌋ = 4) and b [3, 2, 8×10].
 *
 * Tolerance: max relative error ≤ 1e-4. The reference is float32 and within ~5e-7 of itself in float64
 * (fixtures.json `diagnostics.vae_enc.*`); omnirx differs from it only by float32 reduction order (GEMM blocking in
 * im2col convolutions), ~1e-6, so 1e-4 leaves ~100× headroom, while the reference measures a zero pad on the wrong
 * side (top-left: the other stride phase) at 0.68 and un-normalised latents at 0.47 (`diagnostics.sensitivity.vae_enc.*`);
 * a missing or misplaced bias/gain (all perturbed) moves it by ≥ 1e-2 likewise.
 */
import * as path from 'node:path';
import { VaeConfigSchema } from '../../src/models/vae/config';
import { vaeEncodedSize, VaeEncoder, vaeEncoderParams } from '../../src/models/vae/encoder';
import { readSafetensors } from '../../src/models/weights/safetensors';
import { WeightStore } from '../../src/models/weights/weight-store';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { loadFixtures, maxRelErr, ParityReport, readJson, REFERENCE_DIR, TensorPool, toChannelsLast } from '../helpers/fixtures';

const TOL = 1e-4;
const FIXTURES = REFERENCE_DIR;
const CAUSAL = path.join(FIXTURES, 'causal');

describe('VAE encoder: parity with the PyTorch reference (AutoencoderKLWan encoder blocks)', () => {
  let native: NativeBinding;
  let store: WeightStore;
  let encoder: VaeEncoder;
  let get: (name: string) => Float32Array;
  let meta: Record<string, { videoShape: number[]; latentShape: number[] }>;
  const config = VaeConfigSchema.parse(readJson<{ vae: unknown }>(FIXTURES, 'model', 'model.json').vae);
  const report = new ParityReport();
  const pool = new TensorPool(() => native);
  const tensor = pool.tensor;

  beforeAll(async () => {
    native = loadNative();
    store = await WeightStore.open(native, path.join(CAUSAL, 'vae_encoder.safetensors'), vaeEncoderParams(config));
    encoder = new VaeEncoder(native, config, store);
    const loaded = await loadFixtures<{ vaeEncoder: typeof meta }>(CAUSAL);
    get = loaded.get;
    meta = loaded.meta.vaeEncoder;
  });

  afterEach(() => {
    pool.disposeAll();
  });

  afterAll(() => {
    encoder?.dispose();
    store?.dispose();
    report.print('vae encoder parity: max relative errors', 8);
  });

  it('expects exactly the tensors of the reference state dict', async () => {
    const file = await readSafetensors(path.join(CAUSAL, 'vae_encoder.safetensors'));
    const names = vaeEncoderParams(config)
      .map((p) => p.name)
      .sort();
    expect(names).toEqual(file.entries.map((e) => e.name).sort());
  });

  it.each(['a', 'b'])('encodes video %s to the reference normalised latent mean', async (name) => {
    const [, C, F, H, W] = meta[name].videoShape;
    const [, z, , h, w] = meta[name].latentShape;
    expect(vaeEncodedSize(config, H, W)).toEqual({ height: h, width: w });
    const video = tensor([F, H, W, C], toChannelsLast(get(`vae_enc.${name}.video`), C, F, H, W));
    const out = tensor([1, z, F, h, w]);
    await encoder.encode(video, out, { frames: F, height: H, width: W });
    const e = report.record(name, maxRelErr(out.data, get(`vae_enc.${name}.latents`)));
    expect(e).toBeLessThanOrEqual(TOL);
  });

  it('is causal in time: frame f of the latents depends on video frames ≤ f only', async () => {
    const [, C, F, H, W] = meta.a.videoShape;
    const [, z, , h, w] = meta.a.latentShape;
    const data = toChannelsLast(get('vae_enc.a.video'), C, F, H, W);
    const a = tensor([1, z, F, h, w]);
    const b = tensor([1, z, F, h, w]);
    await encoder.encode(tensor([F, H, W, C], data), a, { frames: F, height: H, width: W });
    const changed = data.slice();
    for (let i = (F - 1) * H * W * C; i < changed.length; i++) changed[i] = -changed[i]; // only the last frame
    await encoder.encode(tensor([F, H, W, C], changed), b, { frames: F, height: H, width: W });
    const hw = h * w;
    for (let c = 0; c < z; c++)
      for (let f = 0; f < F; f++) {
        const o = (c * F + f) * hw;
        const same = Array.from(a.data.subarray(o, o + hw)).every((v, i) => v === b.data[o + i]);
        expect(same).toBe(f < F - 1);
      }
  });
});
