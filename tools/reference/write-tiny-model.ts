#!/usr/bin/env node
/**
 * Writes the tiny model used by the PyTorch parity fixtures (test/fixtures/reference/model). Compiled by
 * `npm run build` to dist/tools/reference/write-tiny-model.js.
 *
 * Unlike `writeSeededModel`, parameters the seeded generator initialises to exactly 0 or 1 (biases, norm weights,
 * VAE gammas) are perturbed here (0 + N(0, 0.1²), 1 + N(0, 0.1²)), so a bias or gain applied to the wrong tensor,
 * or not at all, changes the output and fails the parity test instead of passing silently.
 *
 * Usage: node dist/tools/reference/write-tiny-model.js [outDir]   (default: test/fixtures/reference/model)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { ModelSpec } from '../../src/families/wan/model-spec';
import { t5Params } from '../../src/models/t5/encoder';
import type { TokenizerFile } from '../../src/models/t5/tokenizer';
import { vaeDecoderParams } from '../../src/models/vae/decoder';
import { wanDiTParams } from '../../src/models/wan/dit';
import { writeSafetensors } from '../../src/models/weights/safetensors';
import type { ParamSpec } from '../../src/models/weights/weight-store';
import { Rng } from '../../src/util/rng';

export const REFERENCE_SEED = 20260101;
export const REFERENCE_WORDS = ['a', 'red', 'blue', 'ball', 'in', 'room', 'moving', 'left', 'small', 'cube'];

/**
 * Head dim 32/2 = 16 exercises Wan's RoPE split 16 − 4·⌊16/6⌋ = 8 (frames) / 4 (rows) / 4 (columns); the T5 inner
 * width (2·12 = 24) differs from dModel (32); freqDim 24 differs from dim; the VAE has temporal kernel 3, two
 * resolutions (one 2× upsample, a channel change 8 → 4 with a 1×1×1 shortcut) and non-trivial latent statistics.
 */
export function referenceSpec(): ModelSpec {
  return {
    id: 'reference-tiny',
    family: 'wan-t2v',
    description: 'Tiny seeded model (biases/gains perturbed) for the PyTorch parity fixtures of tools/reference.',
    weights: 'seeded',
    textEncoder: {
      vocabSize: 259 + REFERENCE_WORDS.length,
      dModel: 32,
      dKv: 12,
      numHeads: 2,
      dFf: 40,
      numLayers: 2,
      relativeAttentionNumBuckets: 8,
      relativeAttentionMaxDistance: 16,
      eps: 1e-6,
      maxLength: 12,
    },
    transformer: {
      patchSize: [1, 2, 2],
      inChannels: 4,
      outChannels: 4,
      dim: 32,
      ffnDim: 48,
      numHeads: 2,
      numLayers: 2,
      textDim: 32,
      freqDim: 24,
      eps: 1e-6,
      ropeTheta: 10000,
    },
    vae: { zDim: 4, channels: [8, 4], numResBlocks: 1, temporalKernel: 3, latentsMean: [0.1, -0.2, 0.05, 0.3], latentsStd: [0.8, 1.2, 1.5, 0.6] },
    defaults: { width: 24, height: 16, numFrames: 3, fps: 6, numInferenceSteps: 4, guidanceScale: 3, flowShift: 2 },
  };
}

export const REFERENCE_TOKENIZER: TokenizerFile = { type: 'word-bytes', words: REFERENCE_WORDS };

function materialise(params: readonly ParamSpec[], rng: Rng): Record<string, { shape: number[]; data: Float32Array }> {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of params) {
    const data = new Float32Array(p.shape.reduce((a, b) => a * b, 1));
    if (p.init === 'normal') {
      rng.fillNormal(data, p.std ?? 1);
    } else {
      rng.fillNormal(data, 0.1);
      if (p.init === 'ones') for (let i = 0; i < data.length; i++) data[i] += 1;
    }
    out[p.name] = { shape: p.shape, data };
  }
  return out;
}

export async function writeReferenceModel(dir: string): Promise<void> {
  const spec = referenceSpec();
  await mkdir(dir, { recursive: true });
  const rng = new Rng(REFERENCE_SEED);
  const meta = { format: 'pt', generator: 'omnirx tools/reference/write-tiny-model', seed: String(REFERENCE_SEED) };
  await writeSafetensors(path.join(dir, 'text_encoder.safetensors'), materialise(t5Params(spec.textEncoder), rng), meta);
  await writeSafetensors(path.join(dir, 'transformer.safetensors'), materialise(wanDiTParams(spec.transformer), rng), meta);
  await writeSafetensors(path.join(dir, 'vae.safetensors'), materialise(vaeDecoderParams(spec.vae), rng), meta);
  await writeFile(path.join(dir, 'tokenizer.json'), JSON.stringify(REFERENCE_TOKENIZER, null, 1) + '\n');
  await writeFile(path.join(dir, 'model.json'), JSON.stringify(spec, null, 2) + '\n');
}

if (require.main === module) {
  const dir = path.resolve(process.argv[2] ?? path.join('test', 'fixtures', 'reference', 'model'));
  writeReferenceModel(dir).then(
    () => console.log(`wrote ${dir}`),
    (e: unknown) => {
      console.error((e as Error).message);
      process.exit(1);
    },
  );
}
