import type { FeatureCache } from '../../cache/feature-cache';
import type { NativeBinding } from '../../native/binding';
import type { RequestLimits } from '../../request/limits';
import type { OmniRequest, Task } from '../../request/omni-request';
import type { SessionAction, SessionRequest } from '../../request/session-request';
import type { ResolvedParams } from '../params';
import type { PipelinePolicies } from '../policies/policies';
import type { RequestState } from '../request-state';
import type { PipelineSpec } from '../spec';
import type { StageContext } from '../stage';
import type { DiffusionStagePayload, PayloadTensor, StageRole } from '../stage-payload';
import type { StepCost } from '../step-grants';
import type { SessionConfig } from '../session-config';
import type { LoadedModel, ModelLoadOptions } from './model';
import type { ModelSpecBase } from './model-spec';
import type { AdmittedSession, ResolvedSessionParams, SessionEnv, SessionImage, SessionRollout, SessionStageEnv, SessionStageHandler } from './session';

/** What every node of a request's graph sees: ids, the resolved parameters, the loaded model (shared) and the request's abort signal. */
export interface RequestContext<M extends LoadedModel = LoadedModel> extends StageContext<M, ResolvedParams> {
  readonly native: NativeBinding;
  /** Aborts when the request is cancelled. */
  readonly signal: AbortSignal;
  /** Validated `nodeParams`, keyed by node name. */
  readonly nodeParams: Readonly<Record<string, unknown>>;
  /** The executor's feature cache (encoder outputs reused across requests); absent: every request runs its encoders. */
  readonly featureCache?: FeatureCache;
}

/** The work a resolved request will take: for the `admitted` event and the cost model's estimate. */
export interface RequestWork {
  /** Loop steps (denoise steps). */
  steps: number;
  /** Model forwards in all (a guided step runs two). */
  forwards: number;
  /** The steps by cost-model key, so an executor with a cost model can price them. */
  costs: Array<{ cost: StepCost; steps: number }>;
}

/** A stage's part of a family's graph in a disaggregated topology: the nodes it runs and the edges it consumes. */
export interface StagePhase {
  readonly nodes: readonly string[];
  readonly consumes: readonly string[];
}

/** The tensors a phase hands to the next stage (its `payloadType` is the family's own name for them). */
export interface PhaseHandoff {
  payloadType: string;
  tensors: Record<string, PayloadTensor>;
}

/**
 * How a family runs on the Encode / Denoise / Decode stages (docs/disaggregation.md). The request payload into Encode
 * and the artifacts out of Decode are the runtime's; between stages only the family packs and reads its tensors.
 */
export interface FamilyStages<M extends LoadedModel = LoadedModel, S extends RequestState = RequestState> {
  /** Components a stage of `role` constructs and loads (stage-specific construction: Denoise loads no encoder). */
  components(role: StageRole, policies: PipelinePolicies): ReadonlySet<string>;
  /** Components that encode inputs (a Denoise process must hold none of their weights). */
  readonly encoderComponents: readonly string[];
  readonly phases: Readonly<Record<StageRole, StagePhase>>;
  /** What the phase of `role` produced, for the next stage. The tensors are copies: the payload outlives the state. */
  pack(role: 'encode' | 'denoise', ctx: RequestContext<M>, state: S): PhaseHandoff;
  /**
   * Restores an incoming payload's tensors into a fresh state for the phase of `role`.
   * @throws PayloadError for a payload type or tensor the phase cannot take, naming the tensor.
   */
  restore(role: 'denoise' | 'decode', ctx: RequestContext<M>, p: DiffusionStagePayload, state: S): void;
  /** The family's world-session handler on a stage (families without sessions have none). */
  sessions?(env: SessionStageEnv): SessionStageHandler;
}

/** How a family serves interactive world sessions (docs/sessions.md). */
export interface FamilySessions<M extends LoadedModel = LoadedModel, Spec extends ModelSpecBase = ModelSpecBase> {
  /** Components an in-process deployment serving WORLD loads besides its pipelines'. */
  readonly components: readonly string[];
  /**
   * Applies the model's defaults to a validated session request.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE naming `width` or `height` for a size the model cannot take.
   */
  resolve(request: SessionRequest, spec: Spec): ResolvedSessionParams;
  /** Chunk-KV slabs one session holds at most (sink + window + the chunk in flight, per layer) and their size, bytes. */
  kv(spec: Spec, params: ResolvedSessionParams, config: SessionConfig): { slabBytes: number; slabs: number };
  /**
   * Checks that the model can take `action` through `conditioning`.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE whose `param` names the refused field (`action.key`, `action.vector`).
   */
  checkAction(spec: Spec, action: SessionAction, conditioning: PipelinePolicies['conditioning'], config: SessionConfig): void;
  /** Opens the session's rollout in process: encodes the prompt, claims its chunk-KV slabs, primes it with `image`. */
  open(env: SessionEnv & { model: M }, session: AdmittedSession, image: SessionImage | undefined): Promise<SessionRollout>;
}

/** What a family gives `resolve`: the deployment's ceilings and policies. */
export interface ResolveEnv {
  limits: RequestLimits;
  policies: PipelinePolicies;
}

/**
 * A model family as its author writes it (docs/design.md §7), typed by its model `M`, spec `Spec` and request state
 * `S`; `defineFamily` turns it into the `ModelFamily` the runtime registers. Keyed by `model.json`'s `family`.
 */
export interface FamilyDefinition<M extends LoadedModel, Spec extends ModelSpecBase, S extends RequestState> {
  /** The `family` field of this family's `model.json` files. */
  readonly name: string;
  /**
   * The module a stage process loads this family from: a specifier `require` resolves there (a path, or a package
   * subpath), whose export `family` is this family. Absent: the family runs in process only.
   */
  readonly module?: string;
  /** Request tasks the family's graph serves. */
  readonly tasks: readonly Task[];
  /**
   * Validates a `model.json` object of this family (`file` names it in errors: the model and its path relative to
   * the models folder, never a server path, as these errors reach clients).
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file and the field as a dotted path.
   */
  parseSpec(json: unknown, file: string): Spec;
  /**
   * Loads the model in `dir`, constructing only `components`. Files are opened through `resolveModelFile` (none may
   * resolve outside `dir`) and named in errors by its label.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD for a missing or mismatched file; SafetensorsError for a malformed one.
   */
  load(native: NativeBinding, dir: string, spec: Spec, components: ReadonlySet<string>, options: ModelLoadOptions): Promise<M>;
  /** The family's graph with the deployment's policies bound (every task it serves). */
  pipeline(policies: PipelinePolicies): PipelineSpec<RequestContext<M>, S>;
  /** A fresh request state (one slot per edge of the graph). */
  createState(): S;
  /**
   * Applies the model's defaults and the deployment's policies to a validated request and checks what only the model
   * and the combined ceilings can decide; nothing is silently adjusted.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE or OMNIRX_ERR_INVALID_REQUEST with `param` naming the field.
   */
  resolve(request: OmniRequest, spec: Spec, env: ResolveEnv): ResolvedParams;
  /** Bytes a request holds for its whole life (`residentBytes`) and on top while one of its steps runs (`peakBytes`). */
  claim(params: ResolvedParams, spec: Spec): { residentBytes: number; peakBytes: number };
  /** The steps and forwards a request will take, priced by cost-model key. */
  work(params: ResolvedParams, nodeParams: Record<string, unknown>, policies: PipelinePolicies, spec: Spec): RequestWork;
  readonly sessions?: FamilySessions<M, Spec>;
  readonly stages?: FamilyStages<M, S>;
}

/** A registered model family as the engine, executors and placement use it (the erased `FamilyDefinition`). */
export type ModelFamily = FamilyDefinition<LoadedModel, ModelSpecBase, RequestState>;

/**
 * Registers a typed family definition as a `ModelFamily`. The runtime hands a family only the models it loaded and
 * the specs it parsed itself, so erasing `M`, `Spec` and `S` here is sound.
 */
export function defineFamily<M extends LoadedModel, Spec extends ModelSpecBase, S extends RequestState>(definition: FamilyDefinition<M, Spec, S>): ModelFamily {
  return Object.freeze(definition) as unknown as ModelFamily;
}
