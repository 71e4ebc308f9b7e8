import { z } from 'zod';
import type { FeatureCache } from '../../cache/feature-cache';
import type { WanComponent, WanT2VModel } from './model';
import { createTensor, type NativeBinding } from '../../native/binding';
import { EtaSchema } from '../../request/eta';
import { GuidanceIntervalSchema } from '../../request/guidance-interval';
import { OutputModalitySchema, TaskSchema } from '../../request/omni-request';
import type { Artifact } from '../../request/artifacts';
import {
  float32Elements,
  float32Tensor,
  PAYLOAD_SCHEMA_VERSION,
  PayloadError,
  type DiffusionStagePayload,
  type PayloadTensor,
  type StageRole,
} from '../../pipeline/stage-payload';
import type { ResolvedParams } from '../../pipeline/params';
import type { ExpertRouting } from '../../pipeline/policies/expert-routing';
import { SAMPLER_NAMES } from '../../pipeline/policies/sampler-policy';
import type { BuiltPipeline, NodeSpec } from '../../pipeline/spec';
import { latentShape, type WanT2VContext } from './context';
import { WanT2VState } from './state';

/**
 * The Wan T2V/T2I graph split into its three phases (DESIGN.md §9, docs/disaggregation.md). A phase is a set of
 * the graph's own nodes — the very `NodeSpec`s the monolithic engine runs — so both topologies execute the same
 * stage and loop objects and disaggregation changes where computation runs, never the numbers:
 *
 * - encode: `text_encoder` (prompt → text embeds `[1, Lt, dModel]`)
 * - denoise: `denoise` (text embeds → latents `[1, C, F, h, w]`, one step per StepScheduler grant)
 * - decode: `decode_video` | `decode_image`, and `export_latents` when asked (latents → RGB24 frames, latents artifact)
 *
 * Between phases the family packs its edges into a `DiffusionStagePayload` (`wan.request` → `wan.text_embeds` →
 * `wan.latents` → `wan.outputs`); nothing else interprets the tensor names or the metadata.
 */
export interface WanPhase {
  readonly role: StageRole;
  /** Graph nodes this phase runs. */
  readonly nodes: readonly string[];
  /** Edges the phase consumes (produced by the previous phase, or the request's own inputs). */
  readonly consumes: readonly string[];
}

export const WAN_PHASES: Readonly<Record<StageRole, WanPhase>> = Object.freeze({
  encode: { role: 'encode', nodes: ['text_encoder'], consumes: ['prompt'] },
  denoise: { role: 'denoise', nodes: ['denoise'], consumes: ['text_embeds'] },
  decode: { role: 'decode', nodes: ['decode_video', 'decode_image', 'export_latents'], consumes: ['latents'] },
});

/**
 * Components each stage of a disaggregated Wan deployment constructs and loads (stage-specific construction):
 * encode — tokenizer, text encoder and VAE encoder (image conditioning); denoise — the DiT(s) the expert routing
 * selects from (action modules live inside the DiT); decode — the VAE decoder. The Denoise stage never loads an
 * encoder or the VAE.
 */
export function wanStageComponents(role: StageRole, expert: ExpertRouting): Set<WanComponent> {
  switch (role) {
    case 'encode':
      return new Set(['tokenizer', 'text_encoder', 'vae_encoder']);
    case 'denoise':
      return new Set(expert.components as WanComponent[]);
    case 'decode':
      return new Set(['vae']);
  }
}

/** The components of the Wan family that encode inputs (their weight bytes in a Denoise process must be 0). */
export const WAN_ENCODER_COMPONENTS: readonly WanComponent[] = ['tokenizer', 'text_encoder', 'vae_encoder'];

/** The active nodes of `role`'s phase for a request (task and `when` applied), in graph order. */
export function wanPhaseNodes(pipeline: BuiltPipeline<WanT2VContext, WanT2VState>, role: StageRole, params: ResolvedParams): ReadonlyArray<NodeSpec<WanT2VContext, WanT2VState>> {
  const names = WAN_PHASES[role].nodes;
  return pipeline.activeNodes(params).filter((n) => names.includes(n.name));
}

/** Resolved request parameters as they travel in payload metadata (validated again on arrival). */
export const ResolvedParamsSchema = z.strictObject({
  task: TaskSchema,
  model: z.string().min(1).max(128),
  prompt: z.string().max(100_000),
  negativePrompt: z.string().max(100_000),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive(),
  fps: z.number().positive(),
  numInferenceSteps: z.number().int().positive(),
  guidanceScale: z.number(),
  guidanceInterval: GuidanceIntervalSchema,
  flowShift: z.number(),
  sampler: z.enum(SAMPLER_NAMES),
  eta: EtaSchema,
  seed: z.number().int().nonnegative(),
  modalities: z.array(OutputModalitySchema),
  returnLatents: z.boolean(),
  previewEvery: z.number().int().positive().optional(),
  priority: z.number(),
});

/** What every Wan payload carries in `metadata.job`: the request's identity as the stages need it. */
export interface WanJob {
  requestId: string;
  params: ResolvedParams;
  /** Validated `nodeParams` (plain JSON). */
  nodeParams: Record<string, unknown>;
}

const JobMetaSchema = z.strictObject({ params: ResolvedParamsSchema, nodeParams: z.record(z.string(), z.unknown()) });

/** Payload types of the Wan family, in pipeline order. */
export const WAN_PAYLOAD = {
  request: 'wan.request',
  textEmbeds: 'wan.text_embeds',
  latents: 'wan.latents',
  outputs: 'wan.outputs',
} as const;

function payload(job: WanJob, source: StageRole, target: StageRole, payloadType: string, tensors: Record<string, PayloadTensor>, extra: Record<string, unknown> = {}): DiffusionStagePayload {
  return {
    schemaVersion: PAYLOAD_SCHEMA_VERSION,
    requestId: job.requestId,
    sourceStage: source,
    targetStage: target,
    payloadType,
    tensors,
    metadata: { job: { params: job.params, nodeParams: job.nodeParams }, ...extra },
  };
}

/**
 * The job of a Wan payload.
 * @throws PayloadError when `payloadType` is not `want`, or `metadata.job` is missing or malformed.
 */
export function unpackJob(p: DiffusionStagePayload, want: string): WanJob {
  if (p.payloadType !== want) throw new PayloadError(`expected a ${want} payload, got ${p.payloadType}`, { param: 'payloadType' });
  const r = JobMetaSchema.safeParse(p.metadata.job);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new PayloadError(`${want}: metadata.job.${issue.path.map(String).join('.')}: ${issue.message}`, { param: 'metadata.job' });
  }
  return { requestId: p.requestId, params: r.data.params as ResolvedParams, nodeParams: r.data.nodeParams };
}

/** A request entering the pipeline (front → Encode): no tensors, the job in metadata. Source and target are both `encode`. */
export function packRequest(job: WanJob): DiffusionStagePayload {
  return payload(job, 'encode', 'encode', WAN_PAYLOAD.request, {});
}

function expectShape(t: PayloadTensor | undefined, name: string, dtype: PayloadTensor['dtype'], shape: readonly number[]): PayloadTensor {
  if (t === undefined) throw new PayloadError(`tensor "${name}" is missing`, { param: `tensors.${name}` });
  if (t.dtype !== dtype || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new PayloadError(`tensor "${name}" is ${t.dtype} [${t.shape.join(', ')}], expected ${dtype} [${shape.join(', ')}]`, { param: `tensors.${name}` });
  }
  return t;
}

/**
 * Encode → Denoise: `prompt_embeds` (and `negative_embeds` when the guidance needed them), float32 `[1, Lt, dModel]`.
 * The tensors are copies out of native memory: the payload outlives the state (an in-process hand-off passes
 * the payload itself to the next stage).
 */
export function packTextEmbeds(job: WanJob, state: WanT2VState): DiffusionStagePayload {
  if (state.promptEmbeds === undefined) throw new PayloadError('wan.text_embeds: the text_encoder output is missing');
  const tensors: Record<string, PayloadTensor> = { prompt_embeds: float32Tensor(state.promptEmbeds.data.slice(), state.promptEmbeds.shape) };
  if (state.negativeEmbeds !== undefined) tensors.negative_embeds = float32Tensor(state.negativeEmbeds.data.slice(), state.negativeEmbeds.shape);
  return payload(job, 'encode', 'denoise', WAN_PAYLOAD.textEmbeds, tensors);
}

/**
 * Restores the text embeds of a `wan.text_embeds` payload into `state` (fresh native tensors owned by the state).
 * @throws PayloadError for a wrong payload type or a tensor whose shape is not `[1, maxLength, dModel]` of the model.
 */
export function unpackTextEmbeds(ctx: Pick<WanT2VContext, 'model' | 'native'>, p: DiffusionStagePayload, state: WanT2VState): WanJob {
  const job = unpackJob(p, WAN_PAYLOAD.textEmbeds);
  const te = ctx.model.spec.textEncoder;
  const shape = [1, te.maxLength, te.dModel];
  const restore = (name: string) => state.own(createTensor(ctx.native, shape, float32Elements(expectShape(p.tensors[name], name, 'float32', shape), name)));
  state.promptEmbeds = restore('prompt_embeds');
  if (p.tensors.negative_embeds !== undefined) state.negativeEmbeds = restore('negative_embeds');
  return job;
}

/** Denoise → Decode: the final latents, float32 `[1, C, F, h, w]` (copied out of native memory, see `packTextEmbeds`). */
export function packLatents(job: WanJob, state: WanT2VState): DiffusionStagePayload {
  if (state.latents === undefined) throw new PayloadError('wan.latents: the denoise output is missing');
  return payload(job, 'denoise', 'decode', WAN_PAYLOAD.latents, { latents: float32Tensor(state.latents.data.slice(), state.latents.shape) });
}

/**
 * Restores the latents of a `wan.latents` payload into `state`.
 * @throws PayloadError for a wrong payload type or latents whose shape is not the request's `[1, C, F, h, w]`.
 */
export function unpackLatents(ctx: Pick<WanT2VContext, 'model' | 'native' | 'params'>, p: DiffusionStagePayload, state: WanT2VState): WanJob {
  const job = unpackJob(p, WAN_PAYLOAD.latents);
  const shape = [1, ...latentShape({ ...ctx, params: job.params } as WanT2VContext)];
  state.latents = state.own(createTensor(ctx.native, shape, float32Elements(expectShape(p.tensors.latents, 'latents', 'float32', shape), 'latents')));
  return job;
}

/**
 * Decode → front: the request's artifacts. `video.frames` / `image.pixels` are uint8 RGB24 `[F, H, W, 3]` /
 * `[H, W, 3]`, `latents` float32 of the artifact's shape; sizes and fps ride in `metadata.artifacts`.
 */
export function packOutputs(job: WanJob, artifacts: Readonly<Record<string, Artifact>>): DiffusionStagePayload {
  const tensors: Record<string, PayloadTensor> = {};
  const meta: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(artifacts)) {
    if (a.kind === 'video') {
      tensors[`${name}.frames`] = { dtype: 'uint8', shape: [a.numFrames, a.height, a.width, 3], bytes: a.frames };
      meta[name] = { kind: 'video', width: a.width, height: a.height, numFrames: a.numFrames, fps: a.fps };
    } else if (a.kind === 'image') {
      tensors[`${name}.pixels`] = { dtype: 'uint8', shape: [a.height, a.width, 3], bytes: a.pixels };
      meta[name] = { kind: 'image', width: a.width, height: a.height };
    } else {
      tensors[`${name}.data`] = float32Tensor(a.data, a.shape);
      meta[name] = { kind: 'latents', shape: a.shape };
    }
  }
  return payload(job, 'decode', 'decode', WAN_PAYLOAD.outputs, tensors, { artifacts: meta });
}

const ArtifactMetaSchema = z.record(
  z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/),
  z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('video'), width: z.number().int().positive(), height: z.number().int().positive(), numFrames: z.number().int().positive(), fps: z.number().positive() }),
    z.strictObject({ kind: z.literal('image'), width: z.number().int().positive(), height: z.number().int().positive() }),
    z.strictObject({ kind: z.literal('latents'), shape: z.array(z.number().int().nonnegative()).max(8) }),
  ]),
);

/**
 * The artifacts of a `wan.outputs` payload (copies, so the payload's buffer may be dropped).
 * @throws PayloadError for a wrong payload type, malformed `metadata.artifacts` or a tensor that does not match it.
 */
export function unpackOutputs(p: DiffusionStagePayload): { job: WanJob; artifacts: Record<string, Artifact> } {
  const job = unpackJob(p, WAN_PAYLOAD.outputs);
  const r = ArtifactMetaSchema.safeParse(p.metadata.artifacts);
  if (!r.success) throw new PayloadError(`wan.outputs: metadata.artifacts: ${r.error.issues[0].message}`, { param: 'metadata.artifacts' });
  const artifacts: Record<string, Artifact> = {};
  for (const [name, m] of Object.entries(r.data)) {
    if (m.kind === 'video') {
      const t = expectShape(p.tensors[`${name}.frames`], `${name}.frames`, 'uint8', [m.numFrames, m.height, m.width, 3]);
      artifacts[name] = { ...m, frames: t.bytes.slice() };
    } else if (m.kind === 'image') {
      const t = expectShape(p.tensors[`${name}.pixels`], `${name}.pixels`, 'uint8', [m.height, m.width, 3]);
      artifacts[name] = { ...m, pixels: t.bytes.slice() };
    } else {
      const t = expectShape(p.tensors[`${name}.data`], `${name}.data`, 'float32', m.shape);
      artifacts[name] = { kind: 'latents', shape: m.shape, data: float32Elements(t, `${name}.data`).slice() };
    }
  }
  return { job, artifacts };
}

/** One request's run of one phase on a stage: its context, fresh state and the nodes to run. */
export interface WanPhaseRun {
  job: WanJob;
  ctx: WanT2VContext;
  state: WanT2VState;
  nodes: ReadonlyArray<NodeSpec<WanT2VContext, WanT2VState>>;
  consumes: readonly string[];
  /** Aborts the run (`ctx.signal`). */
  abort: AbortController;
}

/** What a stage of the Wan family needs to run its phase. */
export interface WanStageEnv {
  native: NativeBinding;
  pipeline: BuiltPipeline<WanT2VContext, WanT2VState>;
  /** The model `id` with this stage's components loaded. */
  model(id: string): Promise<WanT2VModel>;
  featureCache?: FeatureCache;
}

const INPUT_OF: Readonly<Record<StageRole, string>> = { encode: WAN_PAYLOAD.request, denoise: WAN_PAYLOAD.textEmbeds, decode: WAN_PAYLOAD.latents };

/**
 * Opens `role`'s phase for an incoming payload: validates the job, loads (or reuses) the model, restores the
 * payload's tensors into a fresh state. The caller runs `nodes` (graph runner), then `packWanPhase`, then releases
 * the state once the put resolved.
 * @throws PayloadError for a payload this stage cannot take (wrong type, malformed job or tensors); the model's
 *   load errors (OMNIRX_ERR_UNKNOWN_MODEL, OMNIRX_ERR_MODEL_LOAD).
 */
export async function openWanPhase(env: WanStageEnv, role: StageRole, p: DiffusionStagePayload): Promise<WanPhaseRun> {
  const job = unpackJob(p, INPUT_OF[role]);
  const model = await env.model(job.params.model);
  const abort = new AbortController();
  const ctx: WanT2VContext = { requestId: job.requestId, model, params: job.params, nodeParams: job.nodeParams, native: env.native, signal: abort.signal, featureCache: env.featureCache };
  const state = new WanT2VState();
  try {
    if (role === 'denoise') unpackTextEmbeds(ctx, p, state);
    if (role === 'decode') unpackLatents(ctx, p, state);
  } catch (e) {
    state.release();
    throw e;
  }
  return { job, ctx, state, nodes: wanPhaseNodes(env.pipeline, role, job.params), consumes: WAN_PHASES[role].consumes, abort };
}

/** Packs what `role`'s phase produced into the payload for the next stage (or, after decode, for the front). */
export function packWanPhase(role: StageRole, run: WanPhaseRun): DiffusionStagePayload {
  switch (role) {
    case 'encode':
      return packTextEmbeds(run.job, run.state);
    case 'denoise':
      return packLatents(run.job, run.state);
    case 'decode':
      return packOutputs(run.job, run.state.artifacts);
  }
}
