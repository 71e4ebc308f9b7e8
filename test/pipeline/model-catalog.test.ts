/**
 * ModelCatalog.list and get on a models folder as deployments lay it out: model folders, symlinks to model folders
 * kept elsewhere (what `serve` and `/v1/models` list must match what `generate` loads), and entries that are not models.
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { builtinFamilies } from '../../src/families';
import { ModelCatalog } from '../../src/pipeline/family/catalog';
import { FamilyRegistry } from '../../src/pipeline/family/registry';
import { makeModelsDir } from '../helpers/tiny-model';

describe('ModelCatalog', () => {
  let dir: string;
  beforeAll(async () => {
    const elsewhere = await makeModelsDir();
    dir = mkdtempSync(path.join(tmpdir(), 'omnirx-catalog-'));
    symlinkSync(path.join(elsewhere, 'tiny'), path.join(dir, 'tiny')); // a symlink to a model folder (named as its id)
    symlinkSync(path.join(elsewhere, 'missing'), path.join(dir, 'dangling')); // a symlink to nothing
    mkdirSync(path.join(dir, 'empty')); // a folder without model.json
    writeFileSync(path.join(dir, 'model.json'), '{}'); // a file, not a folder
    symlinkSync(path.join(dir, 'model.json'), path.join(dir, 'file-link')); // a symlink to a file
  });

  it('lists model folders reached through a symlink, and nothing that is not a model folder', () => {
    expect(new ModelCatalog(dir, 'tiny', new FamilyRegistry(builtinFamilies())).list()).toEqual(['tiny']);
  });

  it('loads the spec of a symlinked model, and names the known models for an unknown one', async () => {
    const catalog = new ModelCatalog(dir, 'tiny', new FamilyRegistry(builtinFamilies()));
    await expect(catalog.get(undefined)).resolves.toMatchObject({ spec: { id: 'tiny' } });
    await expect(catalog.get('dangling')).rejects.toMatchObject({
      code: 'OMNIRX_ERR_UNKNOWN_MODEL',
      param: 'model',
      message: expect.stringMatching(/available: tiny$/),
    });
  });

  it('names a models folder that does not exist as such, not as an unknown model', async () => {
    const catalog = new ModelCatalog(path.join(dir, 'nope'), 'tiny', new FamilyRegistry(builtinFamilies()));
    expect(catalog.list()).toEqual([]);
    await expect(catalog.get(undefined)).rejects.toMatchObject({
      code: 'OMNIRX_ERR_UNKNOWN_MODEL',
      param: 'modelsDir',
      // no server path: the message can reach a client
      message: 'the models folder does not exist (OMNIRX_MODELS_DIR or --models-dir names it)',
    });
  });
});
