import { existsSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { Engine, parseDeployConfig, type OmniEvent, type OmniRequestInput } from 'omnirx';
import { builtinFamilies } from 'omnirx/families';
import { lastValueFrom, toArray } from 'rxjs';
import { compileToyFamily, imageOf, makeMixedModelsDir, outputOf, TOY_REQUESTS } from './helpers';
import { family as toyFamily, toyImageFamilyAt } from './toy-image';

// Stage processes run compiled JS: `npm run build` first (dist/src/placement/stage-main.js, and the dist/ that the
// compiled toy family's `omnirx/...` imports resolve to).
const entry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');

let modelsDir: string;
let compiled: ReturnType<typeof compileToyFamily>;

const run = (e: Engine, r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(e.generate(r).pipe(toArray()));

beforeAll(async () => {
  modelsDir = await makeMixedModelsDir();
  compiled = compileToyFamily();
});

afterAll(() => {
  compiled?.cleanup();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe('the toy-image family on stage processes', () => {
  it('over shm: each process loads the family from its compiled module and gives the in-process engine’s bytes', async () => {
    const mono = await Engine.create({ families: [...builtinFamilies(), toyFamily], modelsDir, defaultModel: 'toy', tasks: ['T2V', 'T2I'] });
    const want = await Promise.all(TOY_REQUESTS.map((r) => run(mono, r))).finally(() => mono.close());
    const config = parseDeployConfig({
      schemaVersion: 1,
      modelsDir,
      defaultModel: 'toy',
      tasks: ['T2V', 'T2I'],
      topology: { kind: 'disaggregated', connector: 'shm' },
    });
    const procs = await Engine.fromDeployConfig(config, { families: [...builtinFamilies(), toyImageFamilyAt(compiled.index)], stageEntry: entry });
    try {
      const got = await Promise.all(TOY_REQUESTS.map((r) => run(procs, r)));
      for (let i = 0; i < TOY_REQUESTS.length; i++) expect(imageOf(got[i]).pixels.equals(imageOf(want[i]).pixels)).toBe(true);
      // Wan runs on the same stage processes, loaded from its own module.
      const wan = await run(procs, { model: 'tiny', task: 'T2I', inputs: { prompt: 'a red ball' }, diffusion: { seed: 2 } });
      expect(outputOf(wan).artifacts.image).toMatchObject({ kind: 'image', width: 16, height: 16 });
    } finally {
      await procs.close();
    }
  });

  it('cleans its compiled family up', () => {
    const dir = path.dirname(path.dirname(compiled.index));
    expect(existsSync(compiled.index)).toBe(true);
    compiled.cleanup();
    expect(existsSync(dir)).toBe(false);
  });
});
