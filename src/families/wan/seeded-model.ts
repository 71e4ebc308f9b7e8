import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { Rng } from '../../util/rng';
import type { ModelSpec } from './model-spec';
import { t5Params } from '../../models/t5/encoder';
import type { TokenizerFile } from '../../models/t5/tokenizer';
import { vaeDecoderParams } from '../../models/vae/decoder';
import { vaeEncoderParams } from '../../models/vae/encoder';
import { wanDiTParams } from '../../models/wan/dit';
import { writeSafetensors } from '../../models/weights/safetensors';
import type { ParamSpec } from '../../models/weights/weight-store';

function materialise(params: readonly ParamSpec[], rng: Rng): Record<string, { shape: number[]; data: Float32Array }> {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of params) {
    const data = new Float32Array(p.shape.reduce((a, b) => a * b, 1));
    if (p.init === 'ones') data.fill(1);
    else if (p.init === 'normal') rng.fillNormal(data, p.std ?? 1);
    out[p.name] = { shape: p.shape, data };
  }
  return out;
}

/**
 * Writes a complete model directory with deterministic seeded weights (same spec and seed → byte-identical
 * files): `model.json`, `tokenizer.json` and one safetensors file per component. Used for the embedded default
 * until trained weights ship, and by the tests for tiny models.
 */
export async function writeSeededModel(dir: string, spec: ModelSpec, tokenizer: TokenizerFile, seed: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  const rng = new Rng(seed);
  const meta = { format: 'pt', generator: 'omnirx seeded-model', seed: String(seed) };
  await writeSafetensors(path.join(dir, 'text_encoder.safetensors'), materialise(t5Params(spec.textEncoder), rng), meta);
  await writeSafetensors(path.join(dir, 'transformer.safetensors'), materialise(wanDiTParams(spec.transformer), rng), meta);
  if (spec.transformer_2 !== undefined) {
    await writeSafetensors(path.join(dir, 'transformer_2.safetensors'), materialise(wanDiTParams(spec.transformer_2), rng), meta);
  }
  // Decoder then encoder in one file, as diffusers' AutoencoderKLWan checkpoints hold both.
  await writeSafetensors(path.join(dir, 'vae.safetensors'), materialise([...vaeDecoderParams(spec.vae), ...vaeEncoderParams(spec.vae)], rng), meta);
  await writeFile(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer, null, 1));
  await writeFile(path.join(dir, 'model.json'), JSON.stringify(spec, null, 2));
}
