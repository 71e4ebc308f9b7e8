import { mkdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { normals } from './pipeline';
import { componentTensors, TOY_COMPONENTS, TOY_FAMILY, type ToySpec } from './spec';
import { writeToyWeights } from './weights';

/** A small toy-image model: 8-pixel patches of a 32-dim hidden layer, 16-dim text embeddings in 64 buckets. */
export function toySpec(id = 'toy'): ToySpec {
  return {
    id,
    family: TOY_FAMILY,
    description: 'toy image family: hashed bag-of-words text, pixel-space patch MLP denoiser, colour decoder',
    weights: 'seeded',
    embedder: { buckets: 64, dim: 16 },
    denoiser: { patch: 4, hidden: 32 },
    defaults: { width: 32, height: 32, numFrames: 1, fps: 1, numInferenceSteps: 4, guidanceScale: 3, flowShift: 3 },
  };
}

/**
 * Writes a toy-image model directory `dir` (its `model.json` and one `.toyw` file per component) with weights drawn
 * from `seed`: N(0, 1) scaled by 1/√(fan-in), the decoder a near-identity colour transform.
 */
export async function writeToyModel(dir: string, spec: ToySpec, seed: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'model.json'), JSON.stringify(spec, null, 2));
  const normal = normals(seed);
  const shapes = componentTensors(spec);
  for (const c of TOY_COMPONENTS) {
    const tensors: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const [name, shape] of Object.entries(shapes[c])) {
      const n = shape.reduce((a, d) => a * d, 1);
      const fanIn = shape.length > 1 ? shape[shape.length - 1] : 1;
      const data = new Float32Array(n);
      for (let i = 0; i < n; i++) data[i] = normal() / Math.sqrt(fanIn);
      if (name === 'color') for (let o = 0; o < 3; o++) data[o * 3 + o] += 1;
      tensors[name] = { shape, data };
    }
    await writeToyWeights(path.join(dir, `${c}.toyw`), c, tensors);
  }
}
