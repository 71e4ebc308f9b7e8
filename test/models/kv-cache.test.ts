/**
 * KVCache (src/models/wan/kv-cache.ts) bookkeeping and memory: capacity, which frames stay (sink pinned, the window
 * dropping its oldest non-sink frame first), where the data lands, reset, and native bytes — flat over a 20-chunk
 * CausalWanDiT rollout once the window is full, and back to the baseline after dispose.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { CausalWanDiT } from '../../src/models/wan/causal-dit';
import { WanDiTConfigSchema } from '../../src/models/wan/config';
import { wanDiTParams } from '../../src/models/wan/dit';
import { KVCache, type KVCacheConfig } from '../../src/models/wan/kv-cache';
import { WeightStore } from '../../src/models/weights/weight-store';
import { createTensor, loadNative } from '../../src/native/binding';

const native = loadNative();
const MODEL_DIR = path.join(__dirname, '..', 'fixtures', 'reference', 'model');

/** A chunk's K (or V) where every float of frame f, layer l is `marker(l, f)`. */
const marker = (layer: number, frame: number, isV: boolean): number => layer * 1000 + frame + (isV ? 0.5 : 0);
function chunkData(cache: KVCache, layer: number, firstFrame: number, isV: boolean): Float32Array {
  const ff = cache.frameFloats;
  const out = new Float32Array(cache.config.chunkFrames * ff);
  for (let j = 0; j < cache.config.chunkFrames; j++) out.fill(marker(layer, firstFrame + j, isV), j * ff, (j + 1) * ff);
  return out;
}
/** The marker stored in each slot [0, n) of layer l (checks the slot is uniform). */
function slotMarkers(cache: KVCache, layer: number, n: number, isV: boolean): number[] {
  const data = (isV ? cache.v(layer) : cache.k(layer)).data;
  const ff = cache.frameFloats;
  return Array.from({ length: n }, (_, s) => {
    const row = data.subarray(s * ff, (s + 1) * ff);
    expect(row.every((x) => x === row[0])).toBe(true);
    return row[0];
  });
}
/** What a chunk's forward does: writes its K/V of layer l into the scratch slots [validFrames, validFrames + C). */
function stage(cache: KVCache, l: number, k: Float32Array, v: Float32Array): void {
  const at = cache.validFrames * cache.frameFloats;
  cache.k(l).data.set(k, at);
  cache.v(l).data.set(v, at);
}
function commit(cache: KVCache): void {
  const f0 = cache.committedFrames;
  for (let l = 0; l < cache.config.layers; l++) stage(cache, l, chunkData(cache, l, f0, false), chunkData(cache, l, f0, true));
  cache.commitScratch();
}

describe('KVCache', () => {
  const cfg: KVCacheConfig = { layers: 2, dim: 8, tokensPerFrame: 3, chunkFrames: 2, sinkFrames: 1, windowFrames: 3 };

  it('preallocates S + W + C frame slots per layer for K and V and accounts their bytes', () => {
    const before = native.stats().bytesInUse;
    const cache = new KVCache(native, cfg);
    try {
      expect(cache.capacityFrames).toBe(6);
      expect(cache.frameFloats).toBe(24);
      expect(cache.k(0).shape).toEqual([6, 3, 8]);
      expect(cache.v(1).shape).toEqual([6, 3, 8]);
      expect(cache.bytes).toBe(2 * 2 * 6 * 24 * 4);
      expect(native.stats().bytesInUse - before).toBeGreaterThanOrEqual(cache.bytes);
      expect(() => cache.k(2)).toThrow(RangeError);
    } finally {
      cache.dispose();
    }
    expect(native.stats().bytesInUse).toBe(before);
  });

  it('keeps the sink pinned and drops the oldest non-sink frames first (frame-granular window)', () => {
    const cache = new KVCache(native, cfg);
    try {
      const expected = [[], [0, 1], [0, 1, 2, 3], [0, 3, 4, 5], [0, 5, 6, 7], [0, 7, 8, 9]];
      for (let k = 0; k < expected.length; k++) {
        expect(cache.committedFrames).toBe(2 * k);
        expect(cache.attendedFrames()).toEqual(expected[k]);
        expect(cache.validFrames).toBe(expected[k].length);
        // slot contents match the frame each slot claims to hold, for K and V of every layer
        const resident = cache.residentFrames();
        for (let l = 0; l < 2; l++)
          for (const isV of [false, true]) expect(slotMarkers(cache, l, resident.length, isV)).toEqual(resident.map((f) => marker(l, f, isV)));
        expect(resident[0] ?? 0).toBe(0);
        commit(cache);
      }
      // ring order after 12 frames: sink 0 in slot 0, then frames 9, 10, 11 in their ring slots 1 + (f − 1) mod 3
      expect(cache.residentFrames()).toEqual([0, 10, 11, 9]);
      expect(cache.slotOf(0)).toBe(0);
      expect(cache.slotOf(8)).toBe(-1);
      expect(cache.slotOf(9)).toBe(3);
      expect(cache.slotOf(12)).toBe(-1);
    } finally {
      cache.dispose();
    }
  });

  it('stages the current chunk right after the valid frames (the attended keys are one contiguous prefix)', () => {
    const cache = new KVCache(native, cfg);
    try {
      for (let k = 0; k < 4; k++) {
        const n = cache.validFrames;
        stage(cache, 1, chunkData(cache, 1, 100, false), chunkData(cache, 1, 100, true));
        expect(slotMarkers(cache, 1, n + 2, false).slice(n)).toEqual([marker(1, 100, false), marker(1, 101, false)]);
        commit(cache);
      }
      expect(cache.validFrames + cfg.chunkFrames).toBe(cache.capacityFrames);
    } finally {
      cache.dispose();
    }
  });

  it('handles chunks larger than the window, no sink and no window', () => {
    const big = new KVCache(native, { ...cfg, layers: 1, chunkFrames: 4, sinkFrames: 0, windowFrames: 2 });
    const none = new KVCache(native, { ...cfg, layers: 1, chunkFrames: 1, sinkFrames: 2, windowFrames: 0 });
    try {
      commit(big);
      expect(big.attendedFrames()).toEqual([2, 3]);
      expect(slotMarkers(big, 0, 2, false)).toEqual([marker(0, 2, false), marker(0, 3, false)]);
      commit(big);
      expect(big.attendedFrames()).toEqual([6, 7]);
      for (let i = 0; i < 5; i++) commit(none);
      expect(none.attendedFrames()).toEqual([0, 1]);
      expect(none.capacityFrames).toBe(3);
    } finally {
      big.dispose();
      none.dispose();
    }
  });

  it('reset() empties the cache without reallocating; dispose() frees the native bytes', () => {
    const before = native.stats().bytesInUse;
    const cache = new KVCache(native, cfg);
    const k0 = cache.k(0);
    for (let i = 0; i < 5; i++) commit(cache);
    const held = native.stats().bytesInUse;
    cache.reset();
    expect(cache.committedFrames).toBe(0);
    expect(cache.validFrames).toBe(0);
    expect(cache.attendedFrames()).toEqual([]);
    expect(cache.k(0)).toBe(k0);
    expect(native.stats().bytesInUse).toBe(held);
    cache.dispose();
    cache.dispose();
    expect(cache.bytes).toBe(0);
    expect(native.stats().bytesInUse).toBe(before);
    expect(() => cache.k(0)).toThrow(/after dispose/);
  });

  it('rejects bad geometry and short inputs', () => {
    expect(() => new KVCache(native, { ...cfg, chunkFrames: 0 })).toThrow(/chunkFrames/);
    expect(() => new KVCache(native, { ...cfg, windowFrames: -1 })).toThrow(/windowFrames/);
    const cache = new KVCache(native, cfg);
    try {
      expect(() => cache.store(0, new Float32Array(3), new Float32Array(3))).toThrow(RangeError);
    } finally {
      cache.dispose();
    }
  });
});

describe('CausalWanDiT rollout memory', () => {
  it('holds native bytes flat over 20 chunks once the window is full, and frees them on dispose', async () => {
    const config = WanDiTConfigSchema.parse(JSON.parse(readFileSync(path.join(MODEL_DIR, 'model.json'), 'utf8')).transformer);
    const store = await WeightStore.open(native, path.join(MODEL_DIR, 'transformer.safetensors'), wanDiTParams(config));
    const rollout = { chunkFrames: 2, sinkFrames: 1, localWindowFrames: 3, height: 4, width: 6, textLen: 12 };
    const context = createTensor(native, [1, 12, config.textDim], new Float32Array(12 * config.textDim).map((_, i) => Math.sin(i)));
    try {
      // Weights load and pack on the first build, and the kernels' per-thread scratch grows on the first runs (up
      // to the largest key range): warm both with a throwaway rollout so the baseline holds the model alone.
      const latents = new Float32Array(4 * 2 * 4 * 6);
      const warm = new CausalWanDiT(native, config, store, rollout);
      for (let k = 0; k < 4; k++) {
        await warm.denoiseChunk(latents, [900, 950], context);
        await warm.commitChunk(latents, context);
      }
      warm.dispose();
      const baseline = native.stats().bytesInUse;
      const dit = new CausalWanDiT(native, config, store, rollout);
      expect(dit.chunkShape).toEqual([1, 4, 2, 4, 6]);
      const bytes: number[] = [];
      const own: number[] = [];
      for (let k = 0; k < 20; k++) {
        latents.forEach((_, i) => (latents[i] = Math.sin(i * 0.37 + k)));
        await dit.denoiseChunk(latents, [900, 950], context);
        await dit.denoiseChunk(latents, [400, 450], context);
        await dit.commitChunk(latents, context);
        bytes.push(native.stats().bytesInUse);
        own.push(dit.bytes);
      }
      // committed frames ≥ S + W = 4 from chunk 2 on: the key range stops growing, no plan or buffer is added
      const full = 2;
      for (let k = full; k < 20; k++) {
        expect(bytes[k]).toBe(bytes[full]);
        expect(own[k]).toBe(own[full]);
      }
      expect(dit.cache.attendedFrames()).toEqual([0, 37, 38, 39]);
      expect(dit.cache.bytes).toBe(2 * config.numLayers * (1 + 3 + 2) * 6 * config.dim * 4);
      const held = native.stats().bytesInUse;
      dit.dispose();
      dit.dispose();
      // Everything the DiT held comes back. Compared as ≤ the baseline, not equal: once in a full CI run the process
      // total fell 513 KB below the baseline taken after the warm-up (memory freed by something other than this DiT
      // between the two readings; cause not yet found), which an exact comparison reports as a failure of dispose.
      expect(held - native.stats().bytesInUse).toBeGreaterThanOrEqual(own[full]);
      expect(native.stats().bytesInUse).toBeLessThanOrEqual(baseline);
      await expect(dit.denoiseChunk(latents, [1, 2], context)).rejects.toThrow(/after dispose/);
    } finally {
      context.dispose();
      store.dispose();
    }
  });
});
