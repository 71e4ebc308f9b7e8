import { lastValueFrom, toArray } from 'rxjs';
import { ModelRegistry } from '../../src/models/registry';
import { loadNative } from '../../src/native/binding';
import type { ResolvedParams } from '../../src/pipeline/params';
import { buildPipeline } from '../../src/pipeline/spec';
import { WAN_PAYLOAD } from '../../src/families/wan/phases';
import { defaultWanT2VPolicies, wanT2VPipelineSpec } from '../../src/families/wan/pipeline';
import { createInProcessConnector } from '../../src/placement/connectors';
import { STAGE_ERROR_PAYLOAD } from '../../src/placement/stage-error';
import { StageFront } from '../../src/placement/stage-front';
import { StageHost } from '../../src/placement/stage-host';
import { PAYLOAD_SCHEMA_VERSION, type DiffusionStagePayload } from '../../src/pipeline/stage-payload';
import { DEFAULT_LIMITS } from '../../src/request/limits';
import type { OmniEvent } from '../../src/request/omni-event';
import { makeModelsDir } from '../helpers/tiny-model';

let modelsDir: string;
const native = loadNative();
const policies = defaultWanT2VPolicies();

beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

/** Resolves once `cond()` holds, checking after each macrotask (bounded by the test timeout, not asserted on time). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 2));
}

type Link = ReturnType<typeof createInProcessConnector>;
const host = (role: 'encode' | 'denoise' | 'decode', input: Link, output: Link, maxInFlight?: number, taps: Link[] = [], onHeld?: (id: string) => void) =>
  new StageHost({ role, native, modelsDir, defaultModel: 'tiny', policies, tasks: ['T2V', 'T2I'], input: input.receiver, output: output.sender, maxInFlight, taps: taps.map((t) => t.sender), onHeld });

describe('StageWorker', () => {
  it('credit flow control: a Decode that takes nothing throttles Denoise, Encode and the front; all finish once it runs', async () => {
    const toEncode = createInProcessConnector({ credits: 1 });
    const toDenoise = createInProcessConnector({ credits: 1 });
    const toDecode = createInProcessConnector({ credits: 1 });
    const results = createInProcessConnector({ credits: 4 });
    const encode = host('encode', toEncode, toDenoise);
    const denoise = host('denoise', toDenoise, toDecode, 2);
    const decode = host('decode', toDecode, results);
    void encode.worker.start();
    void denoise.worker.start();
    const front = new StageFront({ models: new ModelRegistry(native, modelsDir, 'tiny', new Set()), pipeline: buildPipeline(wanT2VPipelineSpec(policies), { tasks: ['T2V'] }), policies, limits: DEFAULT_LIMITS, toEncode: toEncode.sender, results: results.receiver });
    try {
      const runs = Array.from({ length: 8 }, (_, i) => lastValueFrom(front.generate({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball' }, diffusion: { seed: i, numInferenceSteps: 2 } }).pipe(toArray())));
      // Steady state: every link full and every stage at its bound.
      await until(() => toDecode.receiver.queued === 1 && denoise.worker.holding().length === 2 && toDenoise.receiver.queued === 1 && encode.worker.holding().length === 1 && toEncode.receiver.queued === 1);
      const where = [...front.locations().values()];
      expect(where.length).toBe(8); // nothing finished
      expect(where.filter((l) => l === 'front').length).toBe(2); // the front's puts wait for Encode's credit
      expect(toDecode.sender.credits).toBe(0);
      void decode.worker.start();
      const outcomes: OmniEvent[][] = await Promise.all(runs);
      expect(outcomes.map((ev) => ev[ev.length - 1].type)).toEqual(Array(8).fill('final'));
    } finally {
      await front.close();
      for (const h of [encode, denoise, decode]) await h.close();
    }
  });

  it('rejects a malformed payload with an error payload naming the tensor, and keeps serving', async () => {
    const input = createInProcessConnector();
    const output = createInProcessConnector();
    const denoise = host('denoise', input, output);
    void denoise.worker.start();
    const params: ResolvedParams = { task: 'T2V', model: 'tiny', prompt: 'a', negativePrompt: '', width: 16, height: 16, numFrames: 3, fps: 6, numInferenceSteps: 2, guidanceScale: 1, guidanceInterval: [0, 1], flowShift: 2, sampler: 'euler', eta: 0, seed: 1, modalities: ['video'], returnLatents: false, priority: 0 };
    const embeds = (shape: number[]): DiffusionStagePayload => ({
      schemaVersion: PAYLOAD_SCHEMA_VERSION,
      requestId: `r-${shape.join('x')}`,
      sourceStage: 'encode',
      targetStage: 'denoise',
      payloadType: WAN_PAYLOAD.textEmbeds,
      tensors: { prompt_embeds: { dtype: 'float32', shape, bytes: new Uint8Array(shape.reduce((a, b) => a * b, 4)) } },
      metadata: { job: { params, nodeParams: {} } },
    });
    try {
      await input.sender.put(embeds([1, 7, 32]));
      await input.sender.put({ ...embeds([1, 8, 32]), requestId: 'r-bad-job', metadata: { job: { params: { ...params, seed: -1 }, nodeParams: {} } } });
      // A guidance interval whose start is after its end, and one that is not a pair.
      await input.sender.put({ ...embeds([1, 8, 32]), requestId: 'r-bad-interval', metadata: { job: { params: { ...params, guidanceInterval: [0.9, 0.1] }, nodeParams: {} } } });
      await input.sender.put({ ...embeds([1, 8, 32]), requestId: 'r-bad-interval-2', metadata: { job: { params: { ...params, guidanceInterval: 'all' }, nodeParams: {} } } });
      // An η outside [0, 1].
      await input.sender.put({ ...embeds([1, 8, 32]), requestId: 'r-bad-eta', metadata: { job: { params: { ...params, eta: 7 }, nodeParams: {} } } });
      await input.sender.put(embeds([1, 8, 32]));
      // The stage works on them concurrently: match outputs by request.
      const got = await Promise.all(Array.from({ length: 6 }, () => output.receiver.get()));
      const byId = (id: string) => got.find((p) => p.requestId === id)!;
      const [a, b, c] = [byId('r-1x7x32'), byId('r-bad-job'), byId('r-1x8x32')];
      for (const id of ['r-bad-interval', 'r-bad-interval-2']) {
        expect(byId(id)).toMatchObject({ requestId: id, payloadType: STAGE_ERROR_PAYLOAD, metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.guidanceInterval') } });
      }
      expect(byId('r-bad-eta')).toMatchObject({ payloadType: STAGE_ERROR_PAYLOAD, metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.eta') } });
      expect(a).toMatchObject({ requestId: 'r-1x7x32', payloadType: STAGE_ERROR_PAYLOAD, metadata: { code: 'OMNIRX_ERR_PAYLOAD', stage: 'denoise', message: 'tensor "prompt_embeds" is float32 [1, 7, 32], expected float32 [1, 8, 32]' } });
      expect(b).toMatchObject({ requestId: 'r-bad-job', payloadType: STAGE_ERROR_PAYLOAD, metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.seed') } });
      expect(c).toMatchObject({ requestId: 'r-1x8x32', payloadType: WAN_PAYLOAD.latents, sourceStage: 'denoise', targetStage: 'decode' });
      expect(c.tensors.latents.shape).toEqual([1, 4, 3, 8, 8]) // [1, zDim, frames, 16 / 2, 16 / 2];
    } finally {
      await denoise.close();
    }
  });

  it('fans one Denoise output out to several consumers: Decode and a latents tap get the same latents', async () => {
    const toEncode = createInProcessConnector();
    const toDenoise = createInProcessConnector();
    const toDecode = createInProcessConnector();
    const tap = createInProcessConnector({ credits: 4 });
    const results = createInProcessConnector({ credits: 4 });
    const hosts = [host('encode', toEncode, toDenoise), host('denoise', toDenoise, toDecode, 2, [tap]), host('decode', toDecode, results)];
    for (const h of hosts) void h.worker.start();
    const front = new StageFront({ models: new ModelRegistry(native, modelsDir, 'tiny', new Set()), pipeline: buildPipeline(wanT2VPipelineSpec(policies), { tasks: ['T2V'] }), policies, limits: DEFAULT_LIMITS, toEncode: toEncode.sender, results: results.receiver });
    try {
      const ids = ['f1', 'f2', 'f3'];
      const outs = await Promise.all(ids.map((requestId, i) => lastValueFrom(front.generate({ requestId, model: 'tiny', task: 'T2V', inputs: { prompt: 'a ball' }, diffusion: { seed: i }, outputs: { returnLatents: true } }).pipe(toArray()))));
      const tapped = [await tap.receiver.get(), await tap.receiver.get(), await tap.receiver.get()];
      expect(tapped.map((p) => p.requestId).sort()).toEqual(ids);
      for (const [i, ev] of outs.entries()) {
        const last = ev[ev.length - 1];
        if (last.type !== 'final') throw new Error(JSON.stringify(last));
        const exported = last.output.artifacts.latents;
        const t = tapped.find((p) => p.requestId === ids[i])!;
        expect(t.payloadType).toBe(WAN_PAYLOAD.latents);
        if (exported.kind !== 'latents') throw new Error('no latents');
        expect(Buffer.from(t.tensors.latents.bytes).equals(Buffer.from(exported.data.buffer, exported.data.byteOffset, exported.data.byteLength))).toBe(true);
      }
    } finally {
      await front.close();
      for (const h of hosts) await h.close();
    }
  });

  it('cancelling a request stops the stage holding it; nothing reaches Decode; the pipeline goes on', async () => {
    const toEncode = createInProcessConnector();
    const toDenoise = createInProcessConnector();
    const toDecode = createInProcessConnector();
    const results = createInProcessConnector({ credits: 4 });
    const decodeHeld: string[] = [];
    const hosts = [host('encode', toEncode, toDenoise), host('denoise', toDenoise, toDecode), host('decode', toDecode, results, 1, [], (id) => decodeHeld.push(id))];
    const denoise = hosts[1];
    for (const h of hosts) void h.worker.start();
    const front = new StageFront({
      models: new ModelRegistry(native, modelsDir, 'tiny', new Set()),
      pipeline: buildPipeline(wanT2VPipelineSpec(policies), { tasks: ['T2V'] }),
      policies,
      limits: DEFAULT_LIMITS,
      toEncode: toEncode.sender,
      results: results.receiver,
      onCancel: (id) => hosts.forEach((h) => h.worker.cancel(id)),
    });
    try {
      const events: OmniEvent[] = [];
      const sub = front.generate({ requestId: 'long', model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball' }, diffusion: { seed: 1, numInferenceSteps: 200, width: 32, height: 32, numFrames: 5 } }).subscribe((e) => events.push(e));
      await until(() => denoise.worker.holding().includes('long'));
      sub.unsubscribe();
      await until(() => denoise.worker.holding().length === 0);
      const next = await lastValueFrom(front.generate({ requestId: 'next', model: 'tiny', task: 'T2V', inputs: { prompt: 'a ball' }, diffusion: { seed: 2 } }).pipe(toArray()));
      expect(next[next.length - 1].type).toBe('final');
      expect(decodeHeld).toEqual(['next']);
      // Nothing after the cancel (these hosts report no progress to the front).
      expect(events.map((e) => e.type)).toEqual(['queued', 'admitted']);
      expect(front.locations().size).toBe(0);
    } finally {
      await front.close();
      for (const h of hosts) await h.close();
    }
  });
});
