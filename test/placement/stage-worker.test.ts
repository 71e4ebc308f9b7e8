import { lastValueFrom, toArray } from 'rxjs';
import type { AdmittedRequest, ExecutionEvent } from '../../src/executor/executor';
import { builtinFamilies } from '../../src/families';
import { resolveWanParams } from '../../src/families/wan/admission';
import { WAN_PAYLOAD } from '../../src/families/wan/phases';
import { loadNative } from '../../src/native/binding';
import { CacheBudgetsSchema } from '../../src/cache/budgets';
import { FamilyRegistry } from '../../src/pipeline/family/registry';
import type { ResolvedParams } from '../../src/pipeline/params';
import { defaultPolicies } from '../../src/pipeline/policies/policies';
import { PAYLOAD_SCHEMA_VERSION, RUNTIME_PAYLOAD, type DiffusionStagePayload } from '../../src/pipeline/stage-payload';
import { createInProcessConnector } from '../../src/placement/connectors';
import { StageExecutor } from '../../src/placement/stage-executor';
import { StageHost } from '../../src/placement/stage-host';
import { DEFAULT_LIMITS } from '../../src/request/limits';
import { OmniRequestSchema, type OmniRequestInput } from '../../src/request/omni-request';
import { makeModelsDir, tinySpec } from '../helpers/tiny-model';

let modelsDir: string;
const native = loadNative();
const policies = defaultPolicies();
const families = new FamilyRegistry(builtinFamilies());
const budgets = CacheBudgetsSchema.parse({});

/** `input` as the engine front admits it (the Wan family's resolution of the tiny model). */
function admit(input: OmniRequestInput, requestId: string): AdmittedRequest {
  const r = OmniRequestSchema.parse(input);
  return { requestId, family: 'wan-t2v', params: resolveWanParams(r, tinySpec(), { limits: DEFAULT_LIMITS, policies }), nodeParams: {} };
}

/** The executor over stages wired by hand: requests enter `toEncode`, results leave `results`; cancels reach `hosts`. */
function executorOver(toEncode: Link, results: Link, hosts: StageHost[]): Promise<StageExecutor> {
  return StageExecutor.over(() => ({
    toEncode: toEncode.sender,
    results: results.receiver,
    health: () => ({ status: 'ok' }),
    reportsDelivery: false,
    cancel: (id) => hosts.forEach((h) => h.worker.cancel(id)),
    memory: () => Promise.reject(new Error('not reported here')),
    close: async () => {
      await toEncode.sender.close();
      await results.receiver.close();
    },
  }));
}

const run = (x: StageExecutor, r: AdmittedRequest) => lastValueFrom(x.execute(r).pipe(toArray()));

beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

/** Resolves once `cond()` holds, checking after each macrotask (bounded by the test timeout, not asserted on time). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 2));
}

type Link = ReturnType<typeof createInProcessConnector>;
const host = (role: 'encode' | 'denoise' | 'decode', input: Link, output: Link, maxInFlight?: number, taps: Link[] = [], onHeld?: (id: string) => void) =>
  new StageHost({
    role,
    native,
    families,
    modelsDir,
    defaultModel: 'tiny',
    policies,
    tasks: ['T2V', 'T2I'],
    world: false,
    budgets,
    input: input.receiver,
    output: output.sender,
    maxInFlight,
    taps: taps.map((t) => t.sender),
    onHeld,
  });

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
    const front = await executorOver(toEncode, results, [encode, denoise, decode]);
    try {
      const runs = Array.from({ length: 8 }, (_, i) =>
        run(front, admit({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball' }, diffusion: { seed: i, numInferenceSteps: 2 } }, `r${i}`)),
      );
      // Steady state: every link full and every stage at its bound.
      await until(
        () =>
          toDecode.receiver.queued === 1 &&
          denoise.worker.holding().length === 2 &&
          toDenoise.receiver.queued === 1 &&
          encode.worker.holding().length === 1 &&
          toEncode.receiver.queued === 1,
      );
      const where = [...front.locations().values()];
      expect(where.length).toBe(8); // nothing finished
      expect(where.filter((l) => l === 'front').length).toBe(2); // the front's puts wait for Encode's credit
      expect(toDecode.sender.credits).toBe(0);
      void decode.worker.start();
      const outcomes: ExecutionEvent[][] = await Promise.all(runs);
      expect(outcomes.map((ev) => ev[ev.length - 1].type)).toEqual(Array(8).fill('output'));
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
    const params: ResolvedParams = {
      task: 'T2V',
      model: 'tiny',
      prompt: 'a',
      negativePrompt: '',
      width: 16,
      height: 16,
      numFrames: 3,
      fps: 6,
      numInferenceSteps: 2,
      guidanceScale: 1,
      guidanceInterval: [0, 1],
      flowShift: 2,
      sampler: 'euler',
      eta: 0,
      seed: 1,
      modalities: ['video'],
      returnLatents: false,
      priority: 0,
    };
    const embeds = (shape: number[]): DiffusionStagePayload => ({
      schemaVersion: PAYLOAD_SCHEMA_VERSION,
      requestId: `r-${shape.join('x')}`,
      sourceStage: 'encode',
      targetStage: 'denoise',
      payloadType: WAN_PAYLOAD.textEmbeds,
      tensors: { prompt_embeds: { dtype: 'float32', shape, bytes: new Uint8Array(shape.reduce((a, b) => a * b, 4)) } },
      metadata: { job: { family: 'wan-t2v', params, nodeParams: {} } },
    });
    try {
      await input.sender.put(embeds([1, 7, 32]));
      await input.sender.put({
        ...embeds([1, 8, 32]),
        requestId: 'r-bad-job',
        metadata: { job: { family: 'wan-t2v', params: { ...params, seed: -1 }, nodeParams: {} } },
      });
      // A guidance interval whose start is after its end, and one that is not a pair.
      await input.sender.put({
        ...embeds([1, 8, 32]),
        requestId: 'r-bad-interval',
        metadata: { job: { family: 'wan-t2v', params: { ...params, guidanceInterval: [0.9, 0.1] }, nodeParams: {} } },
      });
      await input.sender.put({
        ...embeds([1, 8, 32]),
        requestId: 'r-bad-interval-2',
        metadata: { job: { family: 'wan-t2v', params: { ...params, guidanceInterval: 'all' }, nodeParams: {} } },
      });
      // An η outside [0, 1].
      await input.sender.put({
        ...embeds([1, 8, 32]),
        requestId: 'r-bad-eta',
        metadata: { job: { family: 'wan-t2v', params: { ...params, eta: 7 }, nodeParams: {} } },
      });
      await input.sender.put(embeds([1, 8, 32]));
      // The stage works on them concurrently: match outputs by request.
      const got = await Promise.all(Array.from({ length: 6 }, () => output.receiver.get()));
      const byId = (id: string) => got.find((p) => p.requestId === id)!;
      const [a, b, c] = [byId('r-1x7x32'), byId('r-bad-job'), byId('r-1x8x32')];
      for (const id of ['r-bad-interval', 'r-bad-interval-2']) {
        expect(byId(id)).toMatchObject({
          requestId: id,
          payloadType: RUNTIME_PAYLOAD.error,
          metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.guidanceInterval') },
        });
      }
      expect(byId('r-bad-eta')).toMatchObject({
        payloadType: RUNTIME_PAYLOAD.error,
        metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.eta') },
      });
      expect(a).toMatchObject({
        requestId: 'r-1x7x32',
        payloadType: RUNTIME_PAYLOAD.error,
        metadata: { code: 'OMNIRX_ERR_PAYLOAD', stage: 'denoise', message: 'tensor "prompt_embeds" is float32 [1, 7, 32], expected float32 [1, 8, 32]' },
      });
      expect(b).toMatchObject({
        requestId: 'r-bad-job',
        payloadType: RUNTIME_PAYLOAD.error,
        metadata: { code: 'OMNIRX_ERR_PAYLOAD', message: expect.stringContaining('metadata.job.params.seed') },
      });
      expect(c).toMatchObject({ requestId: 'r-1x8x32', payloadType: WAN_PAYLOAD.latents, sourceStage: 'denoise', targetStage: 'decode' });
      expect(c.tensors.latents.shape).toEqual([1, 4, 3, 8, 8]); // [1, zDim, frames, 16 / 2, 16 / 2];
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
    const front = await executorOver(toEncode, results, hosts);
    try {
      const ids = ['f1', 'f2', 'f3'];
      const outs = await Promise.all(
        ids.map((requestId, i) =>
          run(front, admit({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a ball' }, diffusion: { seed: i }, outputs: { returnLatents: true } }, requestId)),
        ),
      );
      const tapped = [await tap.receiver.get(), await tap.receiver.get(), await tap.receiver.get()];
      expect(tapped.map((p) => p.requestId).sort()).toEqual(ids);
      for (const [i, ev] of outs.entries()) {
        const last = ev[ev.length - 1];
        if (last.type !== 'output') throw new Error(JSON.stringify(last));
        const exported = last.artifacts.latents;
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
    const hosts = [
      host('encode', toEncode, toDenoise),
      host('denoise', toDenoise, toDecode),
      host('decode', toDecode, results, 1, [], (id) => decodeHeld.push(id)),
    ];
    const denoise = hosts[1];
    for (const h of hosts) void h.worker.start();
    const front = await executorOver(toEncode, results, hosts);
    try {
      const events: ExecutionEvent[] = [];
      const sub = front
        .execute(
          admit(
            {
              model: 'tiny',
              task: 'T2V',
              inputs: { prompt: 'a red ball' },
              diffusion: { seed: 1, numInferenceSteps: 200, width: 32, height: 32, numFrames: 5 },
            },
            'long',
          ),
        )
        .subscribe((e) => events.push(e));
      await until(() => denoise.worker.holding().includes('long'));
      sub.unsubscribe();
      await until(() => denoise.worker.holding().length === 0);
      const next = await run(front, admit({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a ball' }, diffusion: { seed: 2 } }, 'next'));
      expect(next[next.length - 1].type).toBe('output');
      expect(decodeHeld).toEqual(['next']);
      // Nothing after the cancel (these hosts report no progress to the executor).
      expect(events).toEqual([]);
      expect(front.locations().size).toBe(0);
    } finally {
      await front.close();
      for (const h of hosts) await h.close();
    }
  });
});
