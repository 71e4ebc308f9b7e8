/**
 * The front's spec-only model lookup: it resolves a model from its model.json alone (no weights file is opened), and
 * a missing, non-JSON or mistyped model.json is refused with an error naming the file and the field.
 */
import { readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { loadNative } from '../../src/native/binding';
import { specOnlyRegistry } from '../../src/placement/spec-registry';
import { makeModelsDir, tinySpec } from '../helpers/tiny-model';

let modelsDir: string;
const native = loadNative();

beforeEach(async () => {
  modelsDir = await makeModelsDir();
});

function modelJson(): string {
  return path.join(modelsDir, 'tiny', 'model.json');
}

describe('specOnlyRegistry', () => {
  it('resolves the spec from model.json with every weights file gone: nothing else is read', async () => {
    for (const f of readdirSync(path.join(modelsDir, 'tiny'))) if (f !== 'model.json') unlinkSync(path.join(modelsDir, 'tiny', f));
    const models = specOnlyRegistry(native, modelsDir, 'tiny');
    const m = await models.get(undefined);
    expect(m.spec).toEqual(tinySpec());
    expect(m.weightBytes).toEqual({});
    expect(models.list()).toEqual(['tiny']);
    await models.dispose();
  });

  it('a model without model.json is unknown, named, with param "model"', async () => {
    rmSync(modelJson());
    const models = specOnlyRegistry(native, modelsDir, 'tiny');
    await expect(models.get('tiny')).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNKNOWN_MODEL', param: 'model', message: expect.stringMatching(/unknown model 'tiny'/) });
    await expect(models.get('../etc')).rejects.toMatchObject({ code: 'OMNIRX_ERR_UNKNOWN_MODEL', param: 'model' });
  });

  it('a model.json that is not JSON is refused naming the file', async () => {
    writeFileSync(modelJson(), '{"id": "tiny",');
    await expect(specOnlyRegistry(native, modelsDir, 'tiny').get('tiny')).rejects.toMatchObject({ code: 'OMNIRX_ERR_MODEL_LOAD', message: expect.stringContaining(`${modelJson()}: not valid JSON`) });
  });

  it.each([
    ['a string where a number goes', (s: Record<string, any>) => (s.transformer.numLayers = 'two'), 'transformer.numLayers'],
    ['a missing section', (s: Record<string, any>) => delete s.defaults, 'defaults'],
    ['an unknown key', (s: Record<string, any>) => (s.weightsUrl = 'http://x'), '(root)'],
    ['a negative size', (s: Record<string, any>) => (s.defaults.width = -16), 'defaults.width'],
    ['an η above 1', (s: Record<string, any>) => (s.defaults.eta = 1.5), 'defaults.eta'],
    ['a world-session η as text', (s: Record<string, any>) => (s.defaults.world = { eta: '1' }), 'defaults.world.eta'],
    ['an unknown world-session default', (s: Record<string, any>) => (s.defaults.world = { steps: 4 }), 'defaults.world'],
  ])('a model.json with %s is refused naming the file and the field', async (_what, mutate, field) => {
    const spec = JSON.parse(readFileSync(modelJson(), 'utf8')) as Record<string, any>;
    mutate(spec);
    writeFileSync(modelJson(), JSON.stringify(spec));
    await expect(specOnlyRegistry(native, modelsDir, 'tiny').get('tiny')).rejects.toMatchObject({ code: 'OMNIRX_ERR_MODEL_LOAD', message: expect.stringContaining(`${modelJson()}: ${field}: `) });
  });

  it('a model.json whose parts disagree is refused naming the fields', async () => {
    const spec = JSON.parse(readFileSync(modelJson(), 'utf8')) as Record<string, any>;
    spec.transformer.textDim = 16;
    writeFileSync(modelJson(), JSON.stringify(spec));
    await expect(specOnlyRegistry(native, modelsDir, 'tiny').get('tiny')).rejects.toMatchObject({ code: 'OMNIRX_ERR_MODEL_LOAD', message: expect.stringMatching(/model\.json: transformer\.textDim 16 ≠ textEncoder\.dModel 32/) });
  });
});
