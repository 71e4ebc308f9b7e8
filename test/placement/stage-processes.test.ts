import * as path from 'node:path';
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { loadNative } from '../../src/native/binding';
import { StageExecutor } from '../../src/placement/stage-executor';
import type { StageToParent } from '../../src/placement/stage-ipc';
import type { StageProcesses } from '../../src/placement/stage-processes';
import { TopologySchema } from '../../src/placement/topology';
import type { OmniEvent, OmniOutput } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { makeModelsDir } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

// Stage processes run compiled JS: `npm test` builds dist/ first (pretest → prepare). OMNIRX_STAGE_ENTRY points
// elsewhere (e.g. a private `tsc --outDir` build).
const entry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');

let modelsDir: string;
let engine: Engine;
const native = loadNative();

const reqs: OmniRequestInput[] = [
  { model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball in a blue room' }, diffusion: { seed: 7 } },
  {
    model: 'tiny',
    task: 'T2V',
    inputs: { prompt: 'a blue ball' },
    diffusion: { seed: 11, numFrames: 5, numInferenceSteps: 4 },
    outputs: { returnLatents: true },
  },
  { model: 'tiny', task: 'T2I', inputs: { prompt: 'a red room' }, diffusion: { seed: 5 } },
];

const outputOf = (events: OmniEvent[]): OmniOutput => {
  const last = events[events.length - 1];
  if (last.type !== 'final') throw new Error(`expected final, got ${JSON.stringify(last)}`);
  return last.output;
};

/** The artifacts as comparable bytes (frames, pixels, latents). */
const bytesOf = (o: OmniOutput): Record<string, Buffer> =>
  Object.fromEntries(
    Object.entries(o.artifacts).map(([k, a]) => [
      k,
      a.kind === 'video'
        ? Buffer.from(a.frames)
        : a.kind === 'image'
          ? Buffer.from(a.pixels)
          : Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength),
    ]),
  );

/** An engine whose work runs on stage processes linked by `connector`. */
const start = (connector: 'shm' | 'tcp') =>
  Engine.create({
    families: builtinFamilies(),
    native,
    modelsDir,
    defaultModel: 'tiny',
    tasks: ['T2V', 'T2I'],
    topology: TopologySchema.parse({ kind: 'disaggregated', connector }),
    stageEntry: entry,
  });
/** The stage processes an engine runs on. */
const processesOf = (e: Engine) => (e.executor as StageExecutor).hosting as StageProcesses;

const run = (g: { generate(r: OmniRequestInput): ReturnType<Engine['generate']> }, r: OmniRequestInput) => lastValueFrom(g.generate(r).pipe(toArray()));

beforeAll(async () => {
  modelsDir = await makeModelsDir();
  engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', tasks: ['T2V', 'T2I'], native });
});

afterAll(async () => {
  await engine.close();
});

describe('stage processes', () => {
  it.each(['shm', 'tcp'] as const)('over %s: bit-identical to the monolithic engine; Denoise holds no encoder weights', async (connector) => {
    const sp = await start(connector);
    try {
      const mono = await Promise.all(reqs.map((r) => run(engine, r)));
      const dis = await Promise.all(reqs.map((r) => run(sp, r)));
      for (let i = 0; i < reqs.length; i++) expect(bytesOf(outputOf(dis[i]))).toEqual(bytesOf(outputOf(mono[i])));
      // Progress crosses over IPC and is not lost behind the result: the engine's events, `final` last.
      const kinds = (evs: OmniEvent[]) =>
        evs.map((e) =>
          e.type === 'step' ? `step ${e.node} ${e.index}/${e.total}` : e.type === 'node_start' || e.type === 'node_end' ? `${e.type} ${e.node}` : e.type,
        );
      for (let i = 0; i < reqs.length; i++) expect(kinds(dis[i]).sort()).toEqual(kinds(mono[i]).sort());
      const mem = await processesOf(sp).memory();
      expect(mem.denoise.encoderBytes).toBe(0);
      expect(mem.denoise.components).toEqual(['transformer']);
      expect(mem.encode.components).toEqual(['text_encoder', 'tokenizer', 'vae_encoder']);
      expect(mem.decode.components).toEqual(['vae']);
      expect(Object.keys(mem.denoise.weightBytes)).toEqual(['transformer']);
      expect(Object.keys(mem.decode.weightBytes)).toEqual(['vae']);
      expect(Object.keys(mem.encode.weightBytes).sort()).toEqual(['text_encoder', 'vae_encoder']);
      for (const role of ['encode', 'denoise', 'decode'] as const) {
        expect(mem[role].pid).not.toBe(process.pid);
        expect(mem[role].rssBytes).toBeGreaterThan(0);
      }
    } finally {
      await sp.close();
    }
  });

  it.each(['decode', 'denoise'] as const)(
    'a killed %s process fails the requests it held with OMNIRX_ERR_STAGE_FAILED, is restarted, and new requests succeed',
    async (role) => {
      const sp = await start('shm');
      try {
        const big = (seed: number): OmniRequestInput => ({
          model: 'tiny',
          task: 'T2V',
          inputs: { prompt: 'a red ball' },
          diffusion: { seed, width: 64, height: 64, numFrames: 9, numInferenceSteps: 2, guidanceScale: 1 },
        });
        const victim = processesOf(sp).process(role);
        // Killed the moment it reports taking its first request: that request is in the dead process.
        victim.on('message', (m: StageToParent) => {
          if (m.type === 'held') victim.kill('SIGKILL');
        });
        const requests = [1, 2, 3, 4].map(big);
        const outcomes = await Promise.all(requests.map((r) => run(sp, r)));
        const last = outcomes.map((ev) => ev[ev.length - 1]);
        const failed = last.filter((e) => e.type === 'error');
        expect(failed.length).toBeGreaterThanOrEqual(1);
        for (const e of failed)
          expect(e).toMatchObject({
            type: 'error',
            code: 'OMNIRX_ERR_STAGE_FAILED',
            message: expect.stringContaining(`${role} stage process exited (SIGKILL)`),
          });
        // The others went on and are exactly what the monolithic engine produces.
        for (let i = 0; i < requests.length; i++) {
          if (last[i].type !== 'final') continue;
          expect(bytesOf(outputOf(outcomes[i]))).toEqual(bytesOf(outputOf(await run(engine, requests[i]))));
        }
        await processesOf(sp).whenUp();
        expect(processesOf(sp).restarts).toBe(1);
        expect(processesOf(sp).process(role).pid).not.toBe(victim.pid);
        const after = await run(sp, reqs[0]);
        expect(bytesOf(outputOf(after))).toEqual(bytesOf(outputOf(await run(engine, reqs[0]))));
      } finally {
        await sp.close();
      }
    },
  );
});
