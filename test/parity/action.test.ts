/**
 * Parity of per-frame action conditioning in the Wan DiT family (src/models/wan/dit-blocks.ts
 * `recordActionEmbedding` / `recordConditionEmbeddings`, used by `CausalWanDiT` and `WanDiT`) with the independent
 * PyTorch reference tools/reference/action_reference.py.
 *
 * Fixtures (committed, torch not needed), written by tools/reference/make_action_fixtures.py:
 *  - test/fixtures/reference/action-model: the tiny reference transformer plus an action module (5 keys, 2-vector);
 *  - test/fixtures/reference/action/fixtures.{safetensors,json}: a block-causal rollout of 5 chunks of 2 latent frames
 *    (sink 1, window 3, per-frame sigma schedules, 4 Euler steps, commit at t = 0) with a different action per chunk
 *    (per-frame different keys inside chunks 1–3, non-zero vectors in chunks 0, 1, 3; chunk 4 is all "none" and is
 *    run with the actions omitted), and one bidirectional `WanDiT` forward of a batch of 2 samples with their own
 *    timestep, prompt and per-frame keys and vectors.
 *
 * Tolerance (max|ours − ref| / max|ref|) ≤ 1e-4 for every step's velocity, every chunk's final latents and the
 * bidirectional velocity. Both implementations compute in float32; the reference's distance to itself in float64 is
 * ≤ 4e-7 (`diagnostics.*float32_vs_float64*`) and its two causal formulations (KV cache, full-sequence mask) differ
 * by 3e-7, so float32 reduction-order noise is ~1e-6: 1e-4 leaves ~100× headroom. The mistakes the reference
 * measures (`diagnostics.sensitivity.*`) are all ≥ 0.13: actions ignored (velocity ≥ 0.59 in every chunk), added
 * after time_proj instead of before it (≥ 0.61), vectors ignored (≥ 0.18), a chunk committed without its action
 * (later latents 0.13), one action per sample instead of per frame (bidirectional 1.1) — three orders of magnitude
 * above the tolerance.
 *
 * Set OMNIRX_PARITY_REPORT=1 to print the measured errors.
 */
import * as path from 'node:path';
import { CausalWanDiT } from '../../src/models/wan/causal-dit';
import type { ChunkActions } from '../../src/models/action-module';
import { WanDiTConfigSchema } from '../../src/models/wan/config';
import { WanDiT, wanDiTParams } from '../../src/models/wan/dit';
import { WeightStore } from '../../src/models/weights/weight-store';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { loadFixtures, maxRelErr, ParityReport, readJson, REFERENCE_DIR, TensorPool, eulerFrames } from '../helpers/fixtures';

const TOL = 1e-4;
const MODEL_DIR = path.join(REFERENCE_DIR, 'action-model');
const ACTION = path.join(REFERENCE_DIR, 'action');

interface ActionMeta {
  action: { numKeys: number; vectorDim: number };
  rollout: {
    chunkFrames: number;
    sinkFrames: number;
    localWindowFrames: number;
    chunks: number;
    latentChunkShape: number[];
    steps: number;
    sigmas: number[][];
    attendedFrames: number[][];
    textLen: number;
    actions: Array<{ keys: number[]; hasVectors: boolean }>;
  };
  bidirectional: { latentShape: number[]; t: number[]; keys: number[][]; textLen: number };
  diagnostics: Record<string, number>;
}

describe('per-frame action conditioning (Wan DiT family): parity with the PyTorch reference', () => {
  let native: NativeBinding;
  let store: WeightStore;
  let get: (name: string) => Float32Array;
  let meta: ActionMeta;
  const config = WanDiTConfigSchema.parse(readJson<{ transformer: unknown }>(MODEL_DIR, 'model.json').transformer);
  const report = new ParityReport();
  const pool = new TensorPool(() => native);
  const tensor = pool.tensor;
  const check = (name: string, ours: ArrayLike<number>, ref: ArrayLike<number>): number => report.check(name, ours, ref, TOL);
  const newDiT = (): CausalWanDiT => {
    const r = meta.rollout;
    const [, , , h, w] = r.latentChunkShape;
    return pool.track(
      new CausalWanDiT(native, config, store, {
        chunkFrames: r.chunkFrames,
        sinkFrames: r.sinkFrames,
        localWindowFrames: r.localWindowFrames,
        height: h,
        width: w,
        textLen: r.textLen,
      }),
    );
  };
  /** Chunk k's actions as the fixture ran them; undefined for the all-"none" chunk (the default must match it). */
  const chunkActions = (k: number): ChunkActions | undefined => {
    const a = meta.rollout.actions[k];
    if (a.keys.every((x) => x === 0) && !a.hasVectors) return undefined;
    return { keys: a.keys, vectors: a.hasVectors ? get(`rollout.action_vectors.${k}`) : undefined };
  };

  beforeAll(async () => {
    native = loadNative();
    store = await WeightStore.open(native, path.join(MODEL_DIR, 'transformer.safetensors'), wanDiTParams(config));
    const loaded = await loadFixtures<ActionMeta>(ACTION);
    get = loaded.get;
    meta = loaded.meta;
  });

  afterEach(() => {
    pool.disposeAll();
  });

  afterAll(() => {
    store?.dispose();
    report.print('action parity: max relative errors', 36);
  });

  it('the fixture model has the action module and the fixture varies actions within and across chunks', () => {
    expect(config.action).toEqual(meta.action);
    const keys = meta.rollout.actions.map((a) => a.keys);
    expect(new Set(keys.map((k) => k.join(','))).size).toBe(meta.rollout.chunks);
    expect(keys.some((k) => new Set(k).size > 1)).toBe(true);
    expect(chunkActions(meta.rollout.chunks - 1)).toBeUndefined();
    expect(meta.diagnostics['rollout.masked_vs_cached.max_rel']).toBeLessThan(1e-5);
    // the tolerance is far below every plausible mistake the reference measured
    for (const [k, v] of Object.entries(meta.diagnostics)) if (k.startsWith('sensitivity.')) expect(v).toBeGreaterThan(100 * TOL);
  });

  it('CausalWanDiT follows the reference rollout with per-chunk, per-frame actions (commit with the chunk action)', async () => {
    const r = meta.rollout;
    const dit = newDiT();
    const shape = r.latentChunkShape;
    const context = tensor([1, r.textLen, config.textDim], get('rollout.context'));
    const vel = tensor(shape);
    for (let k = 0; k < r.chunks; k++) {
      expect(dit.cache.attendedFrames()).toEqual(r.attendedFrames[k]);
      const x = get(`rollout.noise.${k}`).slice();
      for (let s = 0; s < r.steps; s++) {
        const sig = r.sigmas.map((row) => row[s]);
        const sigNext = r.sigmas.map((row) => row[s + 1]);
        await dit.denoiseChunk(
          x,
          sig.map((v) => v * 1000),
          context,
          vel,
          chunkActions(k),
        );
        check(`chunk${k}.velocity.step${s}`, vel.data, get(`rollout.velocity.${k}.${s}`));
        eulerFrames(x, vel.data, shape, sig, sigNext);
      }
      check(`chunk${k}.latents`, x, get(`rollout.latents.${k}`));
      await dit.commitChunk(x); // context and actions default to the last denoiseChunk's
    }
  });

  it('commitChunk takes explicit actions over the last denoiseChunk ones', async () => {
    const r = meta.rollout;
    const context = get('rollout.context');
    const t = r.sigmas.map((row) => row[1] * 1000);
    const next = async (commit: ChunkActions | undefined): Promise<Float32Array> => {
      const dit = newDiT();
      await dit.denoiseChunk(get('rollout.noise.0'), t, context, undefined, chunkActions(0));
      await dit.commitChunk(get('rollout.latents.0'), undefined, commit);
      return dit.denoiseChunk(get('rollout.noise.1'), t, context, undefined, chunkActions(1));
    };
    const implicit = await next(undefined);
    const explicitSame = await next(chunkActions(0));
    const none = await next({ keys: [0, 0] });
    expect(Array.from(explicitSame)).toEqual(Array.from(implicit));
    expect(maxRelErr(none, implicit)).toBeGreaterThan(1e-2);
  });

  it('WanDiT (bidirectional) with per-frame actions per batch row matches the reference', async () => {
    const b = meta.bidirectional;
    const [B, C, F, H, W] = b.latentShape;
    const dit = pool.track(new WanDiT(native, config, store));
    const lat = get('bidi.latents');
    const ctx = get('bidi.context');
    const vec = get('bidi.action_vectors');
    const per = C * F * H * W;
    const perCtx = b.textLen * config.textDim;
    const rows = Array.from({ length: B }, (_, i) => ({
      latents: lat.subarray(i * per, (i + 1) * per),
      context: ctx.subarray(i * perCtx, (i + 1) * perCtx),
      t: b.t[i],
      out: new Float32Array(per),
      actions: { keys: b.keys[i], vectors: vec.subarray(i * F * 2, (i + 1) * F * 2) },
    }));
    await dit.forwardRows({ frames: F, height: H, width: W, textLen: b.textLen }, rows);
    const ours = new Float32Array(B * per);
    rows.forEach((row, i) => ours.set(row.out, i * per));
    check('bidirectional.velocity', ours, get('bidi.velocity'));
    // a row alone gives the same bits as in the batch
    const alone = { ...rows[1], out: new Float32Array(per) };
    await dit.forwardRows({ frames: F, height: H, width: W, textLen: b.textLen }, [alone]);
    expect(Array.from(alone.out)).toEqual(Array.from(rows[1].out));
  });
});
