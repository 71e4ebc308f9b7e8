#!/usr/bin/env node
/**
 * Writes the embedded default model (`models/omnirx-default`) with deterministic seeded weights. Runs on
 * `npm ci` (prepare) and skips the work when the directory already holds the same spec.
 * Usage: node dist/tools/make-seeded-model.js [outDir]
 */
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_TOKENIZER, defaultModelSpec } from '../src/models/default-spec';
import { defaultModelsDir } from '../src/models/registry';
import { writeSeededModel } from '../src/models/seeded-model';

const SEED = 20261130;

async function main(): Promise<void> {
  const spec = defaultModelSpec();
  const dir = path.resolve(process.argv[2] ?? path.join(defaultModelsDir(), spec.id));
  const specFile = path.join(dir, 'model.json');
  const files = ['tokenizer.json', 'text_encoder.safetensors', 'transformer.safetensors', 'vae.safetensors'];
  if (existsSync(specFile) && readFileSync(specFile, 'utf8') === JSON.stringify(spec, null, 2) && files.every((f) => existsSync(path.join(dir, f)))) {
    console.log(`omnirx: default model up to date in ${dir}`);
    return;
  }
  const t0 = Date.now();
  await writeSeededModel(dir, spec, DEFAULT_TOKENIZER, SEED);
  console.log(`omnirx: wrote seeded default model to ${dir} (${Date.now() - t0} ms)`);
}

main().catch((e: unknown) => {
  console.error(`omnirx: could not write the default model: ${(e as Error).message}`);
  process.exit(1);
});
