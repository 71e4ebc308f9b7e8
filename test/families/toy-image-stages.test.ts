import { rmSync } from 'node:fs';
import { Engine, type OmniEvent, type OmniRequestInput } from 'omnirx';
import { builtinFamilies } from 'omnirx/families';
import { lastValueFrom, toArray } from 'rxjs';
import { imageOf, makeMixedModelsDir, TOY_REQUESTS } from './helpers';
import { family as toyFamily } from './toy-image';

/** What a stage executor reports of each stage (the components it constructed). */
interface StageMemories {
  memory(): Promise<Record<'encode' | 'denoise' | 'decode', { components: string[]; encoderBytes: number }>>;
}

let modelsDir: string;
let mono: Engine;
let stages: Engine;

const run = (e: Engine, r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(e.generate(r).pipe(toArray()));

beforeAll(async () => {
  modelsDir = await makeMixedModelsDir();
  const families = [...builtinFamilies(), toyFamily];
  mono = await Engine.create({ families, modelsDir, defaultModel: 'toy', tasks: ['T2V', 'T2I'] });
  stages = await Engine.create({
    families,
    modelsDir,
    defaultModel: 'toy',
    tasks: ['T2V', 'T2I'],
    topology: { kind: 'disaggregated', connector: 'in-process', stages: { encode: { credits: 2 }, denoise: { credits: 2 }, decode: { credits: 2 } } },
  });
});

afterAll(async () => {
  await stages.close();
  await mono.close();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe('the toy-image family on Encode / Denoise / Decode stages in process', () => {
  it('gives the in-process engine’s bytes, each stage holding only its own component', async () => {
    const want = await Promise.all(TOY_REQUESTS.map((r) => run(mono, r)));
    const got = await Promise.all(TOY_REQUESTS.map((r) => run(stages, r)));
    for (let i = 0; i < TOY_REQUESTS.length; i++) expect(imageOf(got[i]).pixels.equals(imageOf(want[i]).pixels)).toBe(true);
    // The stages report the loop's steps as the engine does.
    const steps = (evs: OmniEvent[]) => evs.filter((e) => e.type === 'step').length;
    expect(got.map(steps)).toEqual(want.map(steps));
    const mem = await (stages.executor as unknown as StageMemories).memory();
    expect(mem.encode.components).toEqual(['embedder']);
    expect(mem.denoise.components).toEqual(['denoiser']);
    expect(mem.denoise.encoderBytes).toBe(0);
    expect(mem.decode.components).toEqual(['decoder']);
  });
});
