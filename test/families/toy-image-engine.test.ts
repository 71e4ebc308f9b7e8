import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Engine, type OmniEvent, type OmniRequestInput } from 'omnirx';
import { builtinFamilies } from 'omnirx/families';
import { lastValueFrom, toArray } from 'rxjs';
import { imageOf, makeMixedModelsDir, outputOf } from './helpers';
import { family as toyFamily, toySpec } from './toy-image';

let modelsDir: string;
let engine: Engine;

const run = (r: OmniRequestInput): Promise<OmniEvent[]> => lastValueFrom(engine.generate(r).pipe(toArray()));
const toy = (prompt: string, seed: number, extra: Partial<NonNullable<OmniRequestInput['diffusion']>> = {}): OmniRequestInput => ({
  model: 'toy',
  task: 'T2I',
  inputs: { prompt },
  diffusion: { width: 24, height: 16, seed, ...extra },
});
const errorOf = (events: OmniEvent[]) => {
  const last = events[events.length - 1];
  if (last?.type !== 'error') throw new Error(`expected an error event, got ${JSON.stringify(last)}`);
  return last;
};

beforeAll(async () => {
  modelsDir = await makeMixedModelsDir();
  engine = await Engine.create({ families: [...builtinFamilies(), toyFamily], modelsDir, defaultModel: 'tiny', tasks: ['T2V', 'T2I'] });
});

afterAll(async () => {
  await engine.close();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe('a second model family (toy-image) registered beside Wan', () => {
  it('serves T2I: an RGB24 image of the requested size, its loop stepped by the engine one grant per step', async () => {
    const events = await run(toy('a red fox in the snow', 1));
    const img = imageOf(events);
    expect([img.width, img.height, img.pixels.length]).toEqual([24, 16, 24 * 16 * 3]);
    expect(new Set(img.pixels).size).toBeGreaterThan(16);
    const admitted = events.find((e) => e.type === 'admitted');
    expect(admitted).toMatchObject({
      model: 'toy',
      params: { task: 'T2I', width: 24, height: 16, numFrames: 1, numInferenceSteps: 4, guidanceScale: 3, seed: 1 },
      estimate: { steps: 4, forwards: 8 },
    });
    const steps = events.filter((e) => e.type === 'step');
    expect(steps.map((e) => (e.type === 'step' ? `${e.node} ${e.index}/${e.total}` : ''))).toEqual([
      'denoise 0/4',
      'denoise 1/4',
      'denoise 2/4',
      'denoise 3/4',
    ]);
    const nodes = events.filter((e) => e.type === 'node_end').map((e) => (e.type === 'node_end' ? e.node : ''));
    expect(nodes).toEqual(['embed_text', 'denoise', 'render']);
  });

  it('is a function of prompt and seed: same seed → same bytes, another seed or prompt → other bytes', async () => {
    const [a, b, c, d, e] = await Promise.all([
      run(toy('a red fox in the snow', 7)),
      run(toy('a red fox in the snow', 7)),
      run(toy('a red fox in the snow', 8)),
      run(toy('a blue whale at dusk', 7)),
      run(toy('a red fox in the snow', 7, { guidanceScale: 1 })),
    ]);
    const [pa, pb, pc, pd, pe] = [a, b, c, d, e].map((x) => imageOf(x).pixels);
    expect(pb.equals(pa)).toBe(true);
    expect(pc.equals(pa)).toBe(false);
    expect(pd.equals(pa)).toBe(false);
    expect(pe.equals(pa)).toBe(false);
    // Word order does not matter to a bag of words.
    expect(imageOf(await run(toy('the snow in a fox red', 7))).pixels.equals(pa)).toBe(true);
  });

  it('shares one engine with Wan: both families serve requests at once', async () => {
    const [t, w] = await Promise.all([
      run(toy('a red fox', 3)),
      run({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball in a blue room' }, diffusion: { seed: 3 } }),
    ]);
    expect(imageOf(t).width).toBe(24);
    const video = outputOf(w).artifacts.video;
    expect(video).toMatchObject({ kind: 'video', width: 16, height: 16, numFrames: 3 });
    expect(engine.listModels()).toEqual(['tiny', 'toy']);
  });

  it('refuses what the family does not serve, naming the field', async () => {
    const t2v = errorOf(await run({ model: 'toy', task: 'T2V', inputs: { prompt: 'a red fox' } }));
    expect(t2v).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'task' });
    // the engine refuses a task outside the family's `tasks` before the family's admission runs
    expect(t2v.message).toBe("model 'toy' (family 'toy-image') serves T2I, not T2V");
    expect(errorOf(await run(toy('a fox', 1, { width: 26 })))).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.width' });
    expect(errorOf(await run(toy('a fox', 1, { sampler: 'unipc' })))).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.sampler' });
    expect(errorOf(await run({ ...toy('a fox', 1), outputs: { returnLatents: true } }))).toMatchObject({
      code: 'OMNIRX_ERR_UNSUPPORTED_VALUE',
      param: 'outputs.returnLatents',
    });
  });

  it('refuses a malformed toy model.json naming the file and the field', async () => {
    const dir = path.join(modelsDir, 'toy-broken');
    mkdirSync(dir);
    const spec = toySpec('toy-broken');
    writeFileSync(path.join(dir, 'model.json'), JSON.stringify({ ...spec, denoiser: { ...spec.denoiser, patch: 0 } }));
    const err = errorOf(await run({ model: 'toy-broken', task: 'T2I', inputs: { prompt: 'a fox' } }));
    expect(err.code).toBe('OMNIRX_ERR_MODEL_LOAD');
    // the file relative to the models folder, never the server's path: the message reaches the client
    expect(err.message).toContain("model 'toy-broken': toy-broken/model.json");
    expect(err.message).not.toContain(modelsDir);
    expect(err.message).toContain('denoiser.patch');
    writeFileSync(path.join(dir, 'model.json'), JSON.stringify({ ...spec, embedder: { ...spec.embedder, vocab: 10 } }));
    const extra = errorOf(await run({ model: 'toy-broken', task: 'T2I', inputs: { prompt: 'a fox' } }));
    expect(extra.message).toContain('embedder.vocab');
  });
});
