/**
 * The executor contract (docs/design.md §4): the same requests and world sessions, run on an engine over each executor
 * and topology, give the same events — in the same order per request, with the same fields but wall times — and
 * byte-identical artifacts. Each scenario here runs on one engine and returns its normalised record; the contract
 * suites compare every topology's records with the in-process engine's.
 */
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import type { TopologyInput } from '../../src/placement/topology';
import type { WorldSession } from '../../src/engine/session';
import type { SessionAction } from '../../src/request/session-request';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { makeModelsDir, poisonToOverflow, tinySpec, tinyWorldSpec } from '../helpers/tiny-model';

/** A models folder with the tiny model, the tiny world model, and a copy of the tiny model whose DiT yields non-finite values. */
export async function contractModels(): Promise<string> {
  const dir = await makeModelsDir([
    { spec: tinyWorldSpec(), seed: 3 },
    { spec: tinySpec('tiny-nan'), seed: 1 },
  ]);
  poisonToOverflow(dir, 'tiny-nan');
  return dir;
}

/** Session settings of every contract engine. */
export const CONTRACT_SESSIONS = { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, firstChunkSteps: 3 };

/** The requests every topology runs, concurrently. */
export const CONTRACT_REQUESTS: OmniRequestInput[] = [
  { requestId: 't2v', model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball in a blue room' }, diffusion: { seed: 7, numInferenceSteps: 3 } },
  {
    requestId: 't2v-latents',
    model: 'tiny',
    task: 'T2V',
    inputs: { prompt: 'a blue ball' },
    diffusion: { seed: 11, numFrames: 5, numInferenceSteps: 4, guidanceInterval: [0, 0.5] },
    outputs: { returnLatents: true },
  },
  { requestId: 't2v-unguided', model: 'tiny', task: 'T2V', inputs: { prompt: 'room' }, diffusion: { seed: 3, guidanceScale: 1, eta: 0.5 } },
  {
    requestId: 't2v-sigmas',
    model: 'tiny',
    task: 'T2V',
    inputs: { prompt: 'a ball' },
    diffusion: { seed: 4 },
    nodeParams: { denoise: { sigmas: [1, 0.7, 0.3, 0] } },
  },
  { requestId: 't2i-unipc', model: 'tiny', task: 'T2I', inputs: { prompt: 'a red room' }, diffusion: { seed: 5, sampler: 'unipc', numInferenceSteps: 4 } },
  { requestId: 't2v-world-model', model: 'tiny-world', task: 'T2V', inputs: { prompt: 'a red ball' }, diffusion: { seed: 9, numInferenceSteps: 2 } },
  { requestId: 'nan', model: 'tiny-nan', task: 'T2V', inputs: { prompt: 'a' }, diffusion: { seed: 1, numInferenceSteps: 2 } },
  { requestId: 'unknown-model', model: 'nope', task: 'T2V', inputs: { prompt: 'a' } },
  { requestId: 'off-stride', model: 'tiny', task: 'T2V', inputs: { prompt: 'a' }, diffusion: { width: 18 } },
  { requestId: 'bad-node-param', model: 'tiny', task: 'T2V', inputs: { prompt: 'a' }, nodeParams: { denoise: { sigmas: [0.5, 0.9, 0] } } },
];

/** An event with its wall times and the cost model's prediction removed (they differ run to run and by executor). */
export function normalised(e: OmniEvent): unknown {
  const { ...copy } = e as Record<string, unknown>;
  delete copy.ms;
  if (e.type === 'admitted') copy.estimate = { steps: e.estimate.steps, forwards: e.estimate.forwards };
  if (e.type === 'final') {
    const { ms: _ms, ...output } = e.output;
    copy.output = { ...output, artifacts: bytesOf(e.output.artifacts) };
  }
  if (e.type === 'chunk') copy.artifact = bytesOf({ a: e.artifact }).a;
  return copy;
}

/** Artifacts with their pixel, frame and latent data as base64 (compared byte for byte). */
function bytesOf(artifacts: Record<string, import('../../src/request/artifacts').Artifact>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(artifacts).map(([k, a]) => {
      const data = a.kind === 'video' ? a.frames : a.kind === 'image' ? a.pixels : new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
      const { ...meta } = a as Record<string, unknown>;
      delete meta.frames;
      delete meta.pixels;
      delete meta.data;
      return [k, { ...meta, base64: Buffer.from(data).toString('base64') }];
    }),
  );
}

/** Runs every contract request at once; each request's normalised events, by request id. */
export async function runRequests(engine: Engine): Promise<Record<string, unknown[]>> {
  const all = await Promise.all(CONTRACT_REQUESTS.map((r) => lastValueFrom(engine.generate(r).pipe(toArray()))));
  // `queued` positions depend on how fast the others resolve: the contract is that each request is queued once.
  return Object.fromEntries(
    CONTRACT_REQUESTS.map((r, i) => [r.requestId!, all[i].map((e) => (e.type === 'queued' ? { type: 'queued', requestId: e.requestId } : normalised(e)))]),
  );
}

/** Drives `s` one chunk per action (action k set before the credit of chunk k) and closes it; its normalised events. */
export async function scriptedSession(s: WorldSession, actions: SessionAction[]): Promise<unknown[]> {
  const events: OmniEvent[] = [];
  let wake = () => undefined as void;
  const done = new Promise<void>((resolve) => s.events$.subscribe({ next: (e) => (events.push(e), wake()), complete: resolve }));
  const chunks = () => events.filter((e) => e.type === 'chunk').length;
  for (let k = 0; k < actions.length; k++) {
    s.actions.next(actions[k]);
    s.credits.next(1);
    while (chunks() <= k && events.at(-1)?.type !== 'error') await new Promise<void>((r) => (wake = r));
  }
  s.close();
  await done;
  return events.map(normalised);
}

/** The session scenarios: a prompt session with keys, a vector and ids, and an image-to-world session. */
export async function runSessions(engine: Engine): Promise<Record<string, unknown[]>> {
  const keys: SessionAction[] = [{ key: 'none' }, { key: 'up', id: 'u' }, { key: 'left', vector: [0.5, -0.25] }, { key: 'right' }, { key: 'down', id: 'd' }];
  const image = { width: 16, height: 16, data: new Uint8Array(16 * 16 * 3).map((_, i) => (i * 37 + (i >> 4) * 11) & 255) };
  return {
    prompt: await scriptedSession(await engine.session({ sessionId: 'world', prompt: 'a red ball in a blue room', seed: 21, fps: 10 }), keys),
    image: await scriptedSession(await engine.session({ sessionId: 'from-image', prompt: 'a red ball', seed: 9, image }), [
      { key: 'none' },
      { key: 'up' },
      { key: 'up' },
    ]),
  };
}

/** What a topology's engine gave for every contract request and session (normalised events, by scenario id). */
export interface ContractRecord {
  requests: Record<string, unknown[]>;
  sessions: Record<string, unknown[]>;
}

/**
 * Runs every contract request and session on an engine over `topology` (the in-process executor when omitted) with
 * the models of `contractModels()`, and closes it. `stageEntry` is the compiled stage-process entry, for topologies
 * that fork stages.
 */
export async function runContract(modelsDir: string, topology?: TopologyInput, stageEntry?: string): Promise<ContractRecord> {
  const engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: CONTRACT_SESSIONS,
    ...(stageEntry === undefined ? {} : { stageEntry }),
    ...(topology === undefined ? {} : { topology }),
  });
  try {
    return { requests: await runRequests(engine), sessions: await runSessions(engine) };
  } finally {
    await engine.close();
  }
}
