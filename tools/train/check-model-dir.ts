/**
 * Checks a model directory written by tools/train/train.py: exactly the embedded default's architecture and tokenizer,
 * `"weights": "trained"`, finite positive VAE latent statistics, and every component loads in the runtime
 * (`WanT2VModel.load`: strict names and shapes). Exits 1 with the first mismatch.
 *
 * Run (after `npm run build`): node dist/tools/train/check-model-dir.js /tmp/omnirx-smoke
 */
import { isDeepStrictEqual } from 'node:util';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_TOKENIZER, defaultModelSpec } from '../../src/families/wan/default-spec';
import { WanT2VModel } from '../../src/families/wan/model';
import { loadNative } from '../../src/native/binding';

async function main(dir: string | undefined): Promise<void> {
  if (dir === undefined) throw new Error('usage: check-model-dir.js MODEL_DIR');
  const spec = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8'));
  const want = defaultModelSpec();
  const same = (what: string, a: unknown, b: unknown) => {
    if (!isDeepStrictEqual(a, b)) throw new Error(`${what} differs from the embedded default: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  };
  same('weights', spec.weights, 'trained');
  same('textEncoder', spec.textEncoder, want.textEncoder);
  same('transformer', spec.transformer, want.transformer);
  same('defaults', spec.defaults, want.defaults);
  const { latentsMean, latentsStd, ...vae } = spec.vae;
  const { latentsMean: _m, latentsStd: _s, ...wantVae } = want.vae;
  same('vae', vae, wantVae);
  if (!Array.isArray(latentsMean) || latentsMean.length !== want.vae.zDim || !latentsMean.every(Number.isFinite))
    throw new Error('vae.latentsMean must be zDim finite numbers');
  if (!Array.isArray(latentsStd) || latentsStd.length !== want.vae.zDim || !latentsStd.every((s: number) => Number.isFinite(s) && s > 0))
    throw new Error('vae.latentsStd must be zDim finite positive numbers');
  same('tokenizer.json', JSON.parse(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')), DEFAULT_TOKENIZER);
  const model = await WanT2VModel.fromDirectory(loadNative(), dir, new Set(['tokenizer', 'text_encoder', 'transformer', 'vae', 'vae_encoder']));
  model.dispose();
  console.log(`${dir}: OK (trained, default architecture, every component loads)`);
}

main(process.argv[2]).then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`check-model-dir: ${(err as Error).message}`);
    process.exit(1);
  },
);
