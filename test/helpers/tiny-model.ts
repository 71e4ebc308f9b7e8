import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { ModelSpec } from '../../src/families/wan/model-spec';
import { writeSeededModel } from '../../src/families/wan/seeded-model';
import { parseSafetensors, serializeSafetensors } from '../../src/models/weights/safetensors';
import type { TokenizerFile } from '../../src/models/t5/tokenizer';

export const TINY_WORDS = ['a', 'red', 'blue', 'ball', 'in', 'room'];

/** A tiny Wan-style model (pixel stride 4: VAE 2× · patch 2) that runs a whole request in milliseconds. */
export function tinySpec(id = 'tiny'): ModelSpec {
  return {
    id,
    family: 'wan-t2v',
    description: 'tiny seeded test model',
    weights: 'seeded',
    textEncoder: {
      vocabSize: 259 + TINY_WORDS.length,
      dModel: 32,
      dKv: 8,
      numHeads: 2,
      dFf: 48,
      numLayers: 2,
      relativeAttentionNumBuckets: 8,
      relativeAttentionMaxDistance: 16,
      eps: 1e-6,
      maxLength: 8,
    },
    transformer: {
      patchSize: [1, 2, 2],
      inChannels: 4,
      outChannels: 4,
      dim: 32,
      ffnDim: 64,
      numHeads: 2,
      numLayers: 2,
      textDim: 32,
      freqDim: 32,
      eps: 1e-6,
      ropeTheta: 10000,
    },
    vae: { zDim: 4, channels: [8, 4], numResBlocks: 1, temporalKernel: 3, latentsMean: [0, 0, 0, 0], latentsStd: [1, 1, 1, 1] },
    defaults: { width: 16, height: 16, numFrames: 3, fps: 6, numInferenceSteps: 3, guidanceScale: 4, flowShift: 2 },
  };
}

/** The tiny world model (`tiny-world`): the tiny model with a 5-key (none/up/down/left/right) + 2-vector action module. */
export function tinyWorldSpec(): ModelSpec {
  const s = tinySpec('tiny-world');
  return { ...s, transformer: { ...s.transformer, action: { numKeys: 5, vectorDim: 2 } } };
}

export const TINY_TOKENIZER: TokenizerFile = { type: 'word-bytes', words: TINY_WORDS };

/** Writes a models folder holding the tiny model (and any extra specs) into a fresh temp dir; returns its path. */
export async function makeModelsDir(extra: Array<{ spec: ModelSpec; seed: number }> = []): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-models-'));
  for (const { spec, seed } of [{ spec: tinySpec(), seed: 1 }, ...extra]) {
    await writeSeededModel(path.join(dir, spec.id), spec, TINY_TOKENIZER, seed);
  }
  return dir;
}

/**
 * Rewrites model `id` in `modelsDir` so its DiT output projection holds the largest finite float32 in every weight:
 * the weights load (every value is finite), and its first denoise step overflows to non-finite values.
 */
export function poisonToOverflow(modelsDir: string, id: string): void {
  const file = path.join(modelsDir, id, 'transformer.safetensors');
  const parsed = parseSafetensors(readFileSync(file));
  const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const e of parsed.entries) tensors[e.name] = { shape: e.shape, data: parsed.float32(e.name) };
  tensors['proj_out.weight'].data.fill(3.4028234663852886e38);
  writeFileSync(file, serializeSafetensors(tensors));
}
