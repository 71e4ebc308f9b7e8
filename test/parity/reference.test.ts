/**
 * Parity of omnirx's model components with an independent PyTorch reference (tools/reference/omnirx_reference.py,
 * written from the upstream definitions: HF T5EncoderModel, diffusers WanTransformer3DModel / Wan 2.1 WanModel,
 * diffusers AutoencoderKLWan blocks, Wan's sigma schedule, flow-matching Euler and CFG).
 *
 * Everything is committed under test/fixtures/reference/: the tiny model (`model/`, written by
 * tools/reference/write-tiny-model.ts with perturbed biases and gains) and the reference inputs/outputs
 * (`fixtures.safetensors`, `fixtures.json`, written by tools/reference/make_fixtures.py). torch is NOT needed to run
 * this test; see tools/reference/README.md to regenerate the fixtures.
 *
 * Tolerances (max relative error = max|ours − ref| / max|ref|):
 *  - Each component (T5 encoder, DiT forward, VAE decoder, truncated 1-layer taps): ≤ 1e-4. The reference runs in
 *    float32 like upstream; the same reference in float64 differs from it by < 1e-6 (fixtures.json
 *    `diagnostics.*float32_vs_float64`), so float32 rounding in either implementation (different GEMM blocking and
 *    reduction order, float32 RoPE tables where Wan uses float64) accounts for ~1e-6. 1e-4 leaves ~100× headroom
 *    for that noise while any structural mistake (a missing or misplaced bias/gain — all are perturbed away from
 *    0/1 —, a swapped axis, wrong modulation chunk, wrong RoPE split, wrong causal padding) moves the output by
 *    ≥ 1e-2.
 *  - Sampling trajectory (4 Euler steps, CFG 3, shift 2, 8 DiT forwards): ≤ 1e-3 for every step's latents. Errors
 *    feed back through the latents and CFG multiplies the cond − uncond difference (and its error) by 3, so the
 *    per-forward budget is allowed to grow 10×; measured values are far below either bound.
 *  - Integer data (token ids, relative position buckets): exact. Float64-computed tables rounded to float32
 *    (timestep embedding, RoPE cos/sin): ≤ 1e-6 absolute.
 *  - Timestep embedding: Wan 2.1's `sinusoidal_embedding_1d` computes in float64 (as omnirx does) while diffusers
 *    computes in float32; the reference uses Wan's float64 form. The float32 form differs by ~1e-5 absolute in the
 *    embedding and ~1e-6 relative in the velocity (diagnostics), well inside 1e-4 either way.
 *
 * Set OMNIRX_PARITY_REPORT=1 to print the measured errors.
 */
import * as path from 'node:path';
import { isObservable, lastValueFrom } from 'rxjs';
import { relativePositionBucket, T5Encoder, t5Params } from '../../src/models/t5/encoder';
import { WanDiT, wanDiTParams, type DiTShape } from '../../src/models/wan/dit';
import { timestepEmbedding, wanRopeTables } from '../../src/models/wan/rope';
import { WanT2VModel } from '../../src/families/wan/model';
import { WeightStore } from '../../src/models/weights/weight-store';
import { createTensor, loadNative, type NativeBinding } from '../../src/native/binding';
import { applyClassifierFreeGuidance } from '../../src/pipeline/guidance';
import type { ResolvedParams } from '../../src/pipeline/params';
import { eulerStep, flowMatchSigmas } from '../../src/pipeline/samplers/flow-match-euler';
import type { WanT2VContext } from '../../src/families/wan/context';
import { createDenoiseLoop } from '../../src/families/wan/denoise-loop';
import { defaultPolicies } from '../../src/pipeline/policies/policies';

const denoiseLoop = createDenoiseLoop(defaultPolicies());
import { WanT2VState } from '../../src/families/wan/state';
import { loadFixtures, maxAbsErr, ParityReport, REFERENCE_DIR, TensorPool, toChannelsLast } from '../helpers/fixtures';

const COMPONENT_TOL = 1e-4;
const TRAJECTORY_TOL = 1e-3;
const TABLE_ABS_TOL = 1e-6;
/**
 * The DiT with bfloat16 matmuls (`matmulDtype: 'bfloat16'`) against the float32 reference. Each linear rounds its
 * weight and input to bf16 (relative ≤ 2⁻⁸ each, so ≤ 2⁻⁷ ≈ 7.8e-3 per product, random in sign), attention rounds
 * q, k, v and the probabilities alike; the errors of the products on the path add up to a few 1e-3 of the output's
 * scale (measured 3.6e-3 on this fixture). The bound is ≈ 3× that, two orders below what a wrong pair order or a
 * dropped k gives (O(1)).
 */
const BF16_TOL = 1e-2;

const FIXTURES = REFERENCE_DIR;
const MODEL_DIR = path.join(FIXTURES, 'model');

interface FixtureMeta {
  prompts: Record<string, { text: string; length: number }>;
  dit: { t: number; latentShape: number[]; grid: number[]; context: string };
  vae: { latentShape: number[]; videoShape: number[] };
  trajectory: { steps: number; shift: number; guidance: number; cond: string; uncond: string; latentShape: number[]; sigmas: number[] };
  diagnostics: Record<string, unknown>;
}

describe('parity with the PyTorch reference (tools/reference)', () => {
  let native: NativeBinding;
  let model: WanT2VModel;
  let meta: FixtureMeta;
  let get: (name: string) => Float32Array;
  const report = new ParityReport();
  const pool = new TensorPool(() => native);
  const tensor = pool.tensor;
  const check = report.check.bind(report);

  beforeAll(async () => {
    native = loadNative();
    model = await WanT2VModel.fromDirectory(native, MODEL_DIR);
    ({ meta, get } = await loadFixtures<FixtureMeta>(FIXTURES));
  });

  afterEach(() => {
    pool.disposeAll();
  });

  afterAll(() => {
    model?.dispose();
    report.print('parity: max relative errors (abs for tables)', 44);
  });

  describe('text encoder (HF T5EncoderModel + Wan zero padding)', () => {
    it('tokenizes the prompts to the reference ids', () => {
      for (const [name, p] of Object.entries(meta.prompts)) {
        const enc = model.tokenizer.encode(p.text, model.spec.textEncoder.maxLength);
        expect(Array.from(enc.ids)).toEqual(Array.from(get(`t5.${name}.ids`)));
        expect(enc.length).toBe(p.length);
      }
    });

    it('uses HF T5 relative position buckets', () => {
      const c = model.spec.textEncoder;
      const L = c.maxLength;
      const ref = get('t5.relative_buckets');
      const ours = new Float32Array(L * L);
      for (let i = 0; i < L; i++)
        for (let j = 0; j < L; j++) ours[i * L + j] = relativePositionBucket(j - i, c.relativeAttentionNumBuckets, c.relativeAttentionMaxDistance);
      expect(Array.from(ours)).toEqual(Array.from(ref));
    });

    it.each(['prompt0', 'prompt1', 'negative'])('encodes %s (full encoder, padded rows zero)', async (name) => {
      const c = model.spec.textEncoder;
      const enc = model.tokenizer.encode(meta.prompts[name].text, c.maxLength);
      const out = tensor([1, c.maxLength, c.dModel]);
      await model.textEncoder.encode(enc, out);
      check(`t5.${name}`, out.data, get(`t5.${name}.hidden`), COMPONENT_TOL);
      for (let i = enc.length * c.dModel; i < out.numel; i++) expect(out.data[i]).toBe(0);
    });

    it('matches the reference truncated to layer 0 (tap: block 0 + final norm)', async () => {
      const c = { ...model.spec.textEncoder, numLayers: 1 };
      const store = await WeightStore.open(native, path.join(MODEL_DIR, 'text_encoder.safetensors'), t5Params(c));
      const enc1 = new T5Encoder(native, c, store);
      try {
        for (const name of Object.keys(meta.prompts)) {
          const out = tensor([1, c.maxLength, c.dModel]);
          await enc1.encode(model.tokenizer.encode(meta.prompts[name].text, c.maxLength), out);
          check(`t5_1layer.${name}`, out.data, get(`t5_1layer.${name}.hidden`), COMPONENT_TOL);
        }
      } finally {
        enc1.dispose();
        store.dispose();
      }
    });
  });

  describe('DiT (diffusers WanTransformer3DModel / Wan 2.1 WanModel)', () => {
    const shapeOf = (latentShape: number[], textLen: number): DiTShape => ({
      batch: 1,
      frames: latentShape[2],
      height: latentShape[3],
      width: latentShape[4],
      textLen,
    });

    it('builds Wan timestep features (float64 sinusoid, as Wan 2.1)', () => {
      const c = model.spec.transformer;
      const ours = timestepEmbedding(meta.dit.t, c.freqDim);
      const e = report.record('dit.timestep_freqs (abs)', maxAbsErr(ours, get('dit.timestep_freqs')));
      report.record('dit.timestep_freqs vs diffusers f32 (abs)', maxAbsErr(ours, get('dit.timestep_freqs_diffusers_f32')));
      expect(e).toBeLessThanOrEqual(TABLE_ABS_TOL);
    });

    it('builds Wan 3D RoPE tables (head dim 16 → 8/4/4 split)', () => {
      const c = model.spec.transformer;
      const [f, h, w] = meta.dit.grid;
      const { cos, sin } = wanRopeTables(f, h, w, c.dim / c.numHeads, c.ropeTheta);
      const e = report.record('dit.rope_tables (abs)', Math.max(maxAbsErr(cos, get('dit.rope_cos')), maxAbsErr(sin, get('dit.rope_sin'))));
      expect(e).toBeLessThanOrEqual(TABLE_ABS_TOL);
    });

    it('predicts the reference velocity', async () => {
      const c = model.spec.transformer;
      const s = shapeOf(meta.dit.latentShape, model.spec.textEncoder.maxLength);
      const out = tensor(meta.dit.latentShape);
      const io = {
        latents: tensor(meta.dit.latentShape, get('dit.latents')),
        context: tensor([1, s.textLen, c.textDim], get('dit.context')),
        timestep: tensor([1, c.freqDim]),
        out,
      };
      await model.transformer().forward(s, io, [meta.dit.t]);
      check('dit.velocity', out.data, get('dit.velocity'), COMPONENT_TOL);
    });

    it('with bfloat16 matmuls (linears and attention), predicts the reference velocity within the bf16 tolerance', async () => {
      const bf = await WanT2VModel.fromDirectory(native, MODEL_DIR, new Set(['transformer']), { matmulDtype: 'bfloat16' });
      try {
        const c = bf.spec.transformer;
        const s = shapeOf(meta.dit.latentShape, model.spec.textEncoder.maxLength);
        const out = tensor(meta.dit.latentShape);
        const io = {
          latents: tensor(meta.dit.latentShape, get('dit.latents')),
          context: tensor([1, s.textLen, c.textDim], get('dit.context')),
          timestep: tensor([1, c.freqDim]),
          out,
        };
        await bf.transformer().forward(s, io, [meta.dit.t]);
        const e = check('dit.velocity (bfloat16 matmuls)', out.data, get('dit.velocity'), BF16_TOL);
        // Really the bf16 path: float32 GEMMs are within COMPONENT_TOL, bf16 rounding is far above it.
        expect(e).toBeGreaterThan(COMPONENT_TOL);
      } finally {
        bf.dispose();
      }
    });

    it('matches the reference truncated to block 0 (tap: block 0 + head)', async () => {
      const c = { ...model.spec.transformer, numLayers: 1 };
      const store = await WeightStore.open(native, path.join(MODEL_DIR, 'transformer.safetensors'), wanDiTParams(c));
      const dit1 = new WanDiT(native, c, store);
      try {
        const s = shapeOf(meta.dit.latentShape, model.spec.textEncoder.maxLength);
        const out = tensor(meta.dit.latentShape);
        const io = {
          latents: tensor(meta.dit.latentShape, get('dit.latents')),
          context: tensor([1, s.textLen, c.textDim], get('dit.context')),
          timestep: tensor([1, c.freqDim]),
          out,
        };
        await dit1.forward(s, io, [meta.dit.t]);
        check('dit_1layer.velocity', out.data, get('dit_1layer.velocity'), COMPONENT_TOL);
      } finally {
        dit1.dispose();
        store.dispose();
      }
    });
  });

  describe('VAE decoder (AutoencoderKLWan blocks, causal convs)', () => {
    it('decodes the reference video (before clamping)', async () => {
      const [, , F, h, w] = meta.vae.latentShape;
      const [, C, , H, W] = meta.vae.videoShape;
      const out = tensor([F, H, W, C]);
      await model.vae.decode(tensor(meta.vae.latentShape, get('vae.latents')), out, { frames: F, height: h, width: w });
      check('vae.video', out.data, toChannelsLast(get('vae.video'), C, F, H, W), COMPONENT_TOL);
    });
  });

  describe('sampling (Wan sigma schedule with shift, flow-matching Euler, CFG)', () => {
    it('uses Wan get_sampling_sigmas + terminal 0', () => {
      const t = meta.trajectory;
      const sigmas = flowMatchSigmas(t.steps, t.shift);
      expect(maxAbsErr(sigmas, t.sigmas)).toBeLessThanOrEqual(1e-12);
    });

    it('follows the reference trajectory from the same initial noise', async () => {
      const t = meta.trajectory;
      const c = model.spec.transformer;
      const L = model.spec.textEncoder.maxLength;
      const s: DiTShape = { batch: 1, frames: t.latentShape[2], height: t.latentShape[3], width: t.latentShape[4], textLen: L };
      const cond = tensor([1, L, c.textDim], get(`t5.${t.cond}.hidden`));
      const uncond = tensor([1, L, c.textDim], get(`t5.${t.uncond}.hidden`));
      const latents = tensor(t.latentShape, get('traj.noise'));
      const vc = tensor(t.latentShape);
      const vu = tensor(t.latentShape);
      const timestep = tensor([1, c.freqDim]);
      const sigmas = flowMatchSigmas(t.steps, t.shift);
      for (let i = 0; i < t.steps; i++) {
        await model.transformer().forward(s, { latents, context: cond, timestep, out: vc }, [sigmas[i] * 1000]);
        await model.transformer().forward(s, { latents, context: uncond, timestep, out: vu }, [sigmas[i] * 1000]);
        applyClassifierFreeGuidance(vc.data, vu.data, t.guidance);
        eulerStep(latents.data, vc.data, sigmas[i], sigmas[i + 1]);
        check(`traj.latents.${i + 1}`, latents.data, get(`traj.latents.${i + 1}`), TRAJECTORY_TOL);
      }
    });

    it('the denoise loop stage reproduces the trajectory when given the same noise', async () => {
      const t = meta.trajectory;
      const L = model.spec.textEncoder.maxLength;
      const dModel = model.spec.textEncoder.dModel;
      const scale = model.vae.scaleFactor;
      const params: ResolvedParams = {
        task: 'T2V',
        model: model.spec.id,
        prompt: meta.prompts[t.cond].text,
        negativePrompt: meta.prompts[t.uncond].text,
        width: t.latentShape[4] * scale,
        height: t.latentShape[3] * scale,
        numFrames: t.latentShape[2],
        fps: 6,
        numInferenceSteps: t.steps,
        guidanceScale: t.guidance,
        guidanceInterval: [0, 1],
        flowShift: t.shift,
        sampler: 'euler',
        eta: 0,
        seed: 1,
        modalities: ['video'],
        returnLatents: false,
        priority: 0,
      };
      const ctx: WanT2VContext = { requestId: 'parity', model, params, nodeParams: {}, native, signal: new AbortController().signal };
      const state = new WanT2VState();
      state.promptEmbeds = state.own(createTensor(native, [1, L, dModel], get(`t5.${t.cond}.hidden`)));
      state.negativeEmbeds = state.own(createTensor(native, [1, L, dModel], get(`t5.${t.uncond}.hidden`)));
      const loop = await denoiseLoop.init(ctx, state);
      try {
        loop.latents.set(get('traj.noise')); // the initial noise is a fixture input: omnirx's Rng ≠ torch's
        for (let done = false; !done;) {
          const r = denoiseLoop.step(ctx, loop);
          done = (isObservable(r) ? await lastValueFrom(r) : await r).done;
        }
        check('traj.denoise_loop.final', loop.latents, get(`traj.latents.${t.steps}`), TRAJECTORY_TOL);
      } finally {
        denoiseLoop.release(loop);
        state.release();
      }
    });
  });
});
