import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { loadNative } from '../../src/native/binding';
import { StageExecutor } from '../../src/placement/stage-executor';
import { TopologySchema } from '../../src/placement/topology';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { makeModelsDir } from '../helpers/tiny-model';
import { builtinFamilies } from '../../src/families';

let modelsDir: string;
let engine: Engine;
let staged: Engine;

const reqs: OmniRequestInput[] = [
  { model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball in a blue room' }, diffusion: { seed: 7 } },
  {
    model: 'tiny',
    task: 'T2V',
    inputs: { prompt: 'a blue ball' },
    diffusion: { seed: 11, numFrames: 5, numInferenceSteps: 4 },
    outputs: { returnLatents: true },
  },
  { model: 'tiny', task: 'T2V', inputs: { prompt: 'room' }, diffusion: { seed: 3, guidanceScale: 1 } },
  { model: 'tiny', task: 'T2I', inputs: { prompt: 'a red room' }, diffusion: { seed: 5, sampler: 'unipc' } },
];

const finalOf = (events: OmniEvent[]) => {
  const last = events[events.length - 1];
  if (last.type !== 'final') throw new Error(`expected final, got ${JSON.stringify(last)}`);
  return last.output;
};

beforeAll(async () => {
  modelsDir = await makeModelsDir();
  const native = loadNative();
  engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', tasks: ['T2V', 'T2I'], native });
  const topology = TopologySchema.parse({ kind: 'disaggregated', connector: 'in-process' });
  staged = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', tasks: ['T2V', 'T2I'], native, topology });
});

afterAll(async () => {
  await staged.close();
  await engine.close();
});

describe('the engine on disaggregated stages, in-process', () => {
  it('produce bit-identical artifacts to the monolithic engine for concurrent T2V/T2I requests', async () => {
    const mono = await Promise.all(reqs.map((r) => lastValueFrom(engine.generate(r).pipe(toArray()))));
    const dis = await Promise.all(reqs.map((r) => lastValueFrom(staged.generate(r).pipe(toArray()))));
    for (let i = 0; i < reqs.length; i++) {
      const a = finalOf(mono[i]);
      const b = finalOf(dis[i]);
      expect(b.seed).toBe(a.seed);
      expect(Object.keys(b.artifacts).sort()).toEqual(Object.keys(a.artifacts).sort());
      for (const [name, art] of Object.entries(a.artifacts)) {
        const other = b.artifacts[name];
        expect(other.kind).toBe(art.kind);
        if (art.kind === 'video' && other.kind === 'video') {
          expect({ ...other, frames: undefined }).toEqual({ ...art, frames: undefined });
          expect(Buffer.from(other.frames).equals(Buffer.from(art.frames))).toBe(true);
        } else if (art.kind === 'image' && other.kind === 'image') {
          expect(Buffer.from(other.pixels).equals(Buffer.from(art.pixels))).toBe(true);
        } else if (art.kind === 'latents' && other.kind === 'latents') {
          expect(other.shape).toEqual(art.shape);
          expect(
            Buffer.from(other.data.buffer, other.data.byteOffset, other.data.byteLength).equals(
              Buffer.from(art.data.buffer, art.data.byteOffset, art.data.byteLength),
            ),
          ).toBe(true);
        }
      }
    }
    expect(dis[0][0]).toEqual({ type: 'queued', requestId: expect.any(String), position: expect.any(Number) });
  });

  it('emit the monolithic engine’s event sequence: queued, admitted, node_start / step / node_end per node, final', async () => {
    const req: OmniRequestInput = { model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball in a blue room' }, diffusion: { seed: 7, numInferenceSteps: 3 } };
    const mono = await lastValueFrom(engine.generate(req).pipe(toArray()));
    const dis = await lastValueFrom(staged.generate(req).pipe(toArray()));
    const shape = (e: OmniEvent) =>
      e.type === 'step' ? `step ${e.node} ${e.index}/${e.total}` : e.type === 'node_start' || e.type === 'node_end' ? `${e.type} ${e.node}` : e.type;
    expect(dis.map(shape)).toEqual(mono.map(shape));
    expect(dis.map(shape)).toEqual([
      'queued',
      'admitted',
      'node_start text_encoder',
      'node_end text_encoder',
      'node_start denoise',
      'step denoise 0/3',
      'step denoise 1/3',
      'step denoise 2/3',
      'node_end denoise',
      'node_start decode_video',
      'node_end decode_video',
      'final',
    ]);
    const admitted = (evs: OmniEvent[]) => evs.find((e) => e.type === 'admitted');
    const a = admitted(mono);
    const b = admitted(dis);
    if (a?.type !== 'admitted' || b?.type !== 'admitted') throw new Error('no admitted event');
    expect(b.params).toEqual(a.params);
    expect(b.model).toBe(a.model);
    expect({ steps: b.estimate.steps, forwards: b.estimate.forwards }).toEqual({ steps: a.estimate.steps, forwards: a.estimate.forwards });
    // Step fields as the engine reports them: the same timesteps and sigmas, a wall time in ms.
    const steps = (evs: OmniEvent[]) => evs.flatMap((e) => (e.type === 'step' ? [{ timestep: e.timestep, sigma: e.sigma }] : []));
    expect(steps(dis)).toEqual(steps(mono));
    for (const e of dis) if (e.type === 'step' || e.type === 'node_end') expect(e.ms).toBeGreaterThanOrEqual(0);
    expect(new Set(dis.map((e) => e.requestId)).size).toBe(1);
  });

  it('loads only each stage’s components: no encoder or VAE weights in Denoise', async () => {
    const mem = await (staged.executor as StageExecutor).memory();
    expect(Object.keys(mem.encode.weightBytes).sort()).toEqual(['text_encoder', 'vae_encoder']);
    expect(Object.keys(mem.denoise.weightBytes)).toEqual(['transformer']);
    expect(Object.keys(mem.decode.weightBytes)).toEqual(['vae']);
    expect(mem.denoise.components).toEqual(['transformer']);
    expect(mem.encode.components).toEqual(['text_encoder', 'tokenizer', 'vae_encoder']);
    expect(mem.decode.components).toEqual(['vae']);
    expect(mem.denoise.encoderBytes).toBe(0);
    expect(mem.encode.encoderBytes).toBeGreaterThan(0);
  });

  it('fails a request that cannot be served with an error event, and keeps serving', async () => {
    const bad = await lastValueFrom(staged.generate({ model: 'nope', task: 'T2V', inputs: { prompt: 'a' } }).pipe(toArray()));
    expect(bad[bad.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNKNOWN_MODEL' });
    const invalid = await lastValueFrom(staged.generate({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a' }, diffusion: { width: 18 } }).pipe(toArray()));
    expect(invalid[invalid.length - 1]).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'diffusion.width' });
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error('boom');
        },
      },
    ) as never;
    const read = await lastValueFrom(staged.generate(hostile).pipe(toArray()));
    expect(read).toEqual([expect.objectContaining({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' })]);
    const ok = await lastValueFrom(staged.generate(reqs[0]).pipe(toArray()));
    expect(ok[ok.length - 1].type).toBe('final');
  });
});
