/**
 * A model directory written by tools/train/train.py loads in the runtime with every component (strict names and
 * shapes, WanT2VModel.load) and has exactly the embedded default's architecture and tokenizer.
 *
 * Needs a trained directory, so it runs only when OMNIRX_TRAINED_MODEL names one (training takes minutes, too long
 * for the suite):
 *   nice -n 10 /usr/bin/python3 tools/train/train.py --out /tmp/omnirx-smoke --smoke
 *   OMNIRX_TRAINED_MODEL=/tmp/omnirx-smoke npx jest test/train
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_TOKENIZER, defaultModelSpec } from '../../src/models/default-spec';
import { WanT2VModel } from '../../src/models/wan/wan-t2v';
import { loadNative } from '../../src/native/binding';

const DIR = process.env.OMNIRX_TRAINED_MODEL;
const maybe = DIR === undefined ? describe.skip : describe;

maybe('trained model directory', () => {
  const dir = DIR!;
  const spec = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8'));

  it('has the default architecture, trained weights and finite VAE statistics', () => {
    const want = defaultModelSpec();
    expect(spec.weights).toBe('trained');
    expect(spec.textEncoder).toEqual(want.textEncoder);
    expect(spec.transformer).toEqual(want.transformer);
    expect(spec.defaults).toEqual(want.defaults);
    const { latentsMean, latentsStd, ...vae } = spec.vae;
    const { latentsMean: _m, latentsStd: _s, ...wantVae } = want.vae;
    expect(vae).toEqual(wantVae);
    expect(latentsMean).toHaveLength(16);
    expect(latentsStd.every((s: number) => Number.isFinite(s) && s > 0)).toBe(true);
    expect(JSON.parse(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'))).toEqual(DEFAULT_TOKENIZER);
  });

  it('loads every component in the runtime', async () => {
    const model = await WanT2VModel.load(loadNative(), dir, new Set(['tokenizer', 'text_encoder', 'transformer', 'vae', 'vae_encoder']));
    try {
      expect(model.spec.weights).toBe('trained');
    } finally {
      model.dispose();
    }
  });
});
