import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { OmniError } from '../../src/errors';
import { defaultModelSpec } from '../../src/families/wan/default-spec';
import { ModelSpecSchema } from '../../src/families/wan/model-spec';
import { writeSeededModel } from '../../src/families/wan/seeded-model';
import { writeChunkActions } from '../../src/models/action-module';
import { CausalWanDiT } from '../../src/models/wan/causal-dit';
import type { ChunkActions } from '../../src/models/action-module';
import { WanDiTConfigSchema, type WanDiTConfig } from '../../src/models/wan/config';
import { WanDiT, wanDiTParams } from '../../src/models/wan/dit';
import { WeightStore } from '../../src/models/weights/weight-store';
import { loadNative, type NativeBinding } from '../../src/native/binding';
import { readJson, REFERENCE_DIR, TensorPool } from '../helpers/fixtures';
import { TINY_TOKENIZER, tinySpec } from '../helpers/tiny-model';

const ACTION_MODEL = path.join(REFERENCE_DIR, 'action-model');
const PLAIN_MODEL = path.join(REFERENCE_DIR, 'model');
const ROLLOUT = { chunkFrames: 2, sinkFrames: 1, localWindowFrames: 3, height: 4, width: 6, textLen: 12 };

const configOf = (dir: string): WanDiTConfig => WanDiTConfigSchema.parse(readJson<{ transformer: unknown }>(dir, 'model.json').transformer);

/** The message of the OmniError OMNIRX_ERR_UNSUPPORTED_VALUE that `p` rejects with. */
async function rejection(p: Promise<unknown>): Promise<string> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OmniError);
  expect((e as OmniError).code).toBe('OMNIRX_ERR_UNSUPPORTED_VALUE');
  return (e as OmniError).message;
}

describe('action module config and parameters', () => {
  const plain = configOf(PLAIN_MODEL);

  it('is optional, needs ≥ 2 keys and a temporal patch of 1', () => {
    expect(plain.action).toBeUndefined();
    expect(WanDiTConfigSchema.safeParse({ ...plain, action: { numKeys: 5, vectorDim: 2 } }).success).toBe(true);
    expect(WanDiTConfigSchema.safeParse({ ...plain, action: { numKeys: 1, vectorDim: 2 } }).success).toBe(false);
    expect(WanDiTConfigSchema.safeParse({ ...plain, action: { numKeys: 5, vectorDim: -1 } }).success).toBe(false);
    expect(WanDiTConfigSchema.safeParse({ ...plain, patchSize: [2, 2, 2], action: { numKeys: 5, vectorDim: 0 } }).success).toBe(false);
  });

  it('adds the key table (and the vector projection when vectorDim > 0) after the existing parameters', () => {
    const base = wanDiTParams(plain);
    const withVec = wanDiTParams({ ...plain, action: { numKeys: 5, vectorDim: 2 } });
    const noVec = wanDiTParams({ ...plain, action: { numKeys: 7, vectorDim: 0 } });
    expect(withVec.slice(0, base.length)).toEqual(base);
    expect(withVec.slice(base.length)).toEqual([
      { name: 'condition_embedder.action_embedder.key_embedding.weight', shape: [7 - 2, plain.dim], init: 'normal', std: 0.02 },
      { name: 'condition_embedder.action_embedder.vector_proj.weight', shape: [plain.dim, 2], init: 'normal', std: 2 ** -0.5 },
      { name: 'condition_embedder.action_embedder.vector_proj.bias', shape: [plain.dim], init: 'zeros' },
    ]);
    expect(noVec.slice(base.length).map((p) => [p.name, p.shape])).toEqual([['condition_embedder.action_embedder.key_embedding.weight', [7, plain.dim]]]);
  });
});

describe('embedded default and seeded models with an action module', () => {
  it('the embedded default has 5 keys (none, up, down, left, right) and a 2-vector', () => {
    expect(ModelSpecSchema.parse(defaultModelSpec()).transformer.action).toEqual({ numKeys: 5, vectorDim: 2 });
  });

  it('writeSeededModel writes the action parameters, and the other transformer weights do not change', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-action-'));
    const native = loadNative();
    try {
      const plain = tinySpec('plain');
      const spec = { ...plain, id: 'action', transformer: { ...plain.transformer, action: { numKeys: 5, vectorDim: 2 } } };
      await writeSeededModel(path.join(dir, 'plain'), plain, TINY_TOKENIZER, 3);
      await writeSeededModel(path.join(dir, 'action'), spec, TINY_TOKENIZER, 3);
      const a = await WeightStore.open(native, path.join(dir, 'action', 'transformer.safetensors'), wanDiTParams(spec.transformer));
      const p = await WeightStore.open(native, path.join(dir, 'plain', 'transformer.safetensors'), wanDiTParams(plain.transformer));
      try {
        const table = a.get('condition_embedder.action_embedder.key_embedding.weight', [5, 32]).data;
        const std = Math.sqrt(table.reduce((s, x) => s + x * x, 0) / table.length);
        expect(std).toBeGreaterThan(0.015);
        expect(std).toBeLessThan(0.025);
        expect(Array.from(a.get('condition_embedder.action_embedder.vector_proj.bias', [32]).data)).toEqual(new Array(32).fill(0));
        for (const { name, shape } of wanDiTParams(plain.transformer)) expect(Array.from(a.get(name, shape).data)).toEqual(Array.from(p.get(name, shape).data));
      } finally {
        a.dispose();
        p.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('writeChunkActions', () => {
  const cfg = { numKeys: 5, vectorDim: 2 };
  const run = (a: ChunkActions | undefined, c: typeof cfg | undefined = cfg) => {
    const out = { keys: new Float32Array(3).fill(9), vectors: new Float32Array(6).fill(9) };
    writeChunkActions(c, 3, a, out, 'test');
    return out;
  };
  const error = (fn: () => unknown): string => {
    try {
      fn();
    } catch (e) {
      expect((e as OmniError).code).toBe('OMNIRX_ERR_UNSUPPORTED_VALUE');
      return (e as Error).message;
    }
    throw new Error('expected an error');
  };

  it('writes keys and vectors, and defaults to key 0 with zero vectors', () => {
    const a = run({ keys: [1, 4, 0], vectors: new Float32Array([1, 2, 3, 4, 5, 6]) });
    expect(Array.from(a.keys)).toEqual([1, 4, 0]);
    expect(Array.from(a.vectors)).toEqual([1, 2, 3, 4, 5, 6]);
    const b = run({ keys: [2, 2, 3] });
    expect(Array.from(b.keys)).toEqual([2, 2, 3]);
    expect(Array.from(b.vectors)).toEqual([0, 0, 0, 0, 0, 0]);
    const c = run(undefined);
    expect(Array.from(c.keys)).toEqual([0, 0, 0]);
    expect(Array.from(c.vectors)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('names the offending frame and leaves the buffers untouched', () => {
    expect(error(() => run({ keys: [1, 2] }))).toBe('test: need 3 action keys (one per latent frame), got 2');
    expect(error(() => run({ keys: [1, 2.5, 0] }))).toMatch(/key 2.5 at frame 1 is not an integer in \[0, 5\)/);
    expect(error(() => run({ keys: [0, 0, 5] }))).toMatch(/key 5 at frame 2/);
    expect(error(() => run({ keys: [-1, 0, 0] }))).toMatch(/key -1 at frame 0/);
    expect(error(() => run({ keys: [0, 0, 0], vectors: new Float32Array(4) }))).toMatch(/vectors have 4 values, expected 3×2/);
    expect(error(() => run({ keys: [0, 0, 0], vectors: new Float32Array([0, 0, 0, Infinity, 0, 0]) }))).toMatch(/Infinity at frame 1 is not finite/);
    expect(error(() => run({ keys: [0, 0, 0], vectors: new Float32Array(3) }, { numKeys: 5, vectorDim: 0 }))).toMatch(/takes no action vectors/);
    expect(error(() => writeChunkActions(undefined, 3, { keys: [0, 0, 0] }, {}, 'test'))).toMatch(/no action module/);
    const out = { keys: new Float32Array(3).fill(9) };
    expect(() => writeChunkActions(cfg, 3, { keys: [1, 1, 7] }, out, 'test')).toThrow(OmniError);
    expect(Array.from(out.keys)).toEqual([9, 9, 9]);
  });
});

describe('CausalWanDiT and WanDiT with actions (tiny models)', () => {
  let native: NativeBinding;
  const stores: WeightStore[] = [];
  const pool = new TensorPool(() => native);
  const open = async (dir: string): Promise<{ config: WanDiTConfig; store: WeightStore }> => {
    const config = configOf(dir);
    const store = await WeightStore.open(native, path.join(dir, 'transformer.safetensors'), wanDiTParams(config));
    stores.push(store);
    return { config, store };
  };

  beforeAll(() => {
    native = loadNative();
  });
  afterEach(() => pool.disposeAll());
  afterAll(() => stores.forEach((s) => s.dispose()));

  const latents = new Float32Array(4 * 2 * 4 * 6).map((_, i) => Math.sin(i));
  const context = new Float32Array(12 * 32).map((_, i) => Math.cos(i));

  it('omitted actions equal explicit "none" with zero vectors, bit for bit; actions change the output', async () => {
    const { config, store } = await open(ACTION_MODEL);
    const dit = pool.track(new CausalWanDiT(native, config, store, ROLLOUT));
    const t = [500, 700];
    const omitted = await dit.denoiseChunk(latents, t, context);
    const none = await dit.denoiseChunk(latents, t, context, undefined, { keys: [0, 0], vectors: new Float32Array(4) });
    const up = await dit.denoiseChunk(latents, t, context, undefined, { keys: [1, 1] });
    expect(Array.from(none)).toEqual(Array.from(omitted));
    expect(Array.from(up)).not.toEqual(Array.from(omitted));
  });

  it('CausalWanDiT rejects invalid actions (naming the frame) and actions for a model without an action module', async () => {
    const a = await open(ACTION_MODEL);
    const dit = pool.track(new CausalWanDiT(native, a.config, a.store, ROLLOUT));
    const t = [500, 700];
    expect(await rejection(dit.denoiseChunk(latents, t, context, undefined, { keys: [1] }))).toMatch(/denoiseChunk: need 2 action keys/);
    expect(await rejection(dit.denoiseChunk(latents, t, context, undefined, { keys: [1, 5] }))).toMatch(/key 5 at frame 1/);
    expect(await rejection(dit.denoiseChunk(latents, t, context, undefined, { keys: [1, 1], vectors: new Float32Array([0, Number.NaN, 0, 0]) }))).toMatch(/NaN at frame 0/);
    expect(await rejection(dit.commitChunk(latents, context, { keys: [0.5, 1] }))).toMatch(/commitChunk: action key 0.5 at frame 0/);
    expect(dit.chunkIndex).toBe(0); // nothing was committed
    const p = await open(PLAIN_MODEL);
    const plain = pool.track(new CausalWanDiT(native, p.config, p.store, ROLLOUT));
    expect(await rejection(plain.denoiseChunk(latents, t, context, undefined, { keys: [0, 0] }))).toMatch(/no action module/);
  });

  it('a rejected denoiseChunk does not replace the actions commitChunk defaults to', async () => {
    const { config, store } = await open(ACTION_MODEL);
    const t = [500, 700];
    const after = async (bad: boolean): Promise<Float32Array> => {
      const dit = pool.track(new CausalWanDiT(native, config, store, ROLLOUT));
      await dit.denoiseChunk(latents, t, context, undefined, { keys: [3, 4], vectors: new Float32Array([1, -1, 0.5, 2]) });
      if (bad) await rejection(dit.denoiseChunk(latents, t, context, undefined, { keys: [9, 9] }));
      await dit.commitChunk(latents);
      return dit.denoiseChunk(latents, t, context);
    };
    expect(Array.from(await after(true))).toEqual(Array.from(await after(false)));
  });

  it('WanDiT.forwardRows rejects bad per-row actions and actions for a model without an action module', async () => {
    const shape = { frames: 2, height: 4, width: 6, textLen: 12 };
    const row = (actions?: ChunkActions) => ({ latents, context, t: 400, out: new Float32Array(latents.length), actions });
    const a = await open(ACTION_MODEL);
    const dit = pool.track(new WanDiT(native, a.config, a.store));
    expect(await rejection(dit.forwardRows(shape, [row({ keys: [0, 0] }), row({ keys: [0, 1, 2] })]))).toMatch(/sample 1: need 2 action keys/);
    const omitted = row();
    const none = row({ keys: [0, 0] });
    await dit.forwardRows(shape, [omitted, none]);
    expect(Array.from(none.out)).toEqual(Array.from(omitted.out));
    const p = await open(PLAIN_MODEL);
    const plain = pool.track(new WanDiT(native, p.config, p.store));
    expect(await rejection(plain.forwardRows(shape, [row(), row({ keys: [0, 0] })]))).toMatch(/sample 1: this model has no action module/);
  });
});
