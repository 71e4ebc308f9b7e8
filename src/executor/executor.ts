import type { Observable } from 'rxjs';
import type { ErrorCode } from '../errors';
import type { RequestWork } from '../pipeline/family/family';
import type { AdmittedSession, SessionExecutionEvent, SessionImage } from '../pipeline/family/session';
import type { ResolvedParams } from '../pipeline/params';
import type { Artifact } from '../request/artifacts';
import type { OmniEvent } from '../request/omni-event';
import type { SessionAction } from '../request/session-request';

/**
 * A request the engine has validated, resolved and admitted, as an executor receives it: plain, structured-clone-safe
 * data (it travels to stage processes as the job of a payload).
 */
export interface AdmittedRequest {
  readonly requestId: string;
  /** The registered family of the request's model (`model.json`'s `family`). */
  readonly family: string;
  /** The resolved parameters; `params.model` is the model id. */
  readonly params: ResolvedParams;
  /** Validated `nodeParams`, keyed by node name (plain JSON). */
  readonly nodeParams: Readonly<Record<string, unknown>>;
}

/** Why an execution failed: plain data the engine turns into an `error` event. */
export interface ExecutionFailure {
  code: ErrorCode;
  message: string;
  /** The offending field, as a dotted path. */
  param?: string;
  /** The graph node that was running. */
  node?: string;
  /** Artifacts produced before the failure. */
  partial?: Record<string, Artifact>;
}

/**
 * What an execution reports: node boundaries, loop steps and streamed chunks (with the request's id, as the engine
 * passes them on), then exactly one `output` (the named artifacts) or `failed`, and completes.
 */
export type ExecutionEvent =
  | Extract<OmniEvent, { type: 'node_start' | 'step' | 'chunk' | 'node_end' }>
  | { type: 'output'; artifacts: Record<string, Artifact> }
  | { type: 'failed'; failure: ExecutionFailure };

/** The live inputs of a world session, owned by the engine's session front. */
export interface SessionInputs {
  /** One value per chunk the consumer has granted credits for (credit-gated by the front). */
  readonly permits$: Observable<number>;
  /** The latest valid action (replayed on subscribe, then each new one); a chunk uses the latest when it starts. */
  readonly actions$: Observable<SessionAction>;
  /** A flush: a chunk still in its denoise steps starts again with the latest action. */
  readonly flush$: Observable<void>;
}

/** An open world session on an executor. */
export interface SessionExecution {
  /**
   * Cold, one subscriber: subscribing starts the rollout (chunks as `permits$` allow); it emits the chunks' denoise
   * steps and decoded chunks and errors with an OmniError when the session fails.
   */
  readonly events$: Observable<SessionExecutionEvent>;
  /** Native bytes the session holds here (0 when its state lives in other processes), and its chunk-KV slab bytes. */
  stats(): { nativeBytes: number; slabBytes: number };
  /**
   * Ends the session (its `events$` stops; one never subscribed never starts) and resolves once every stage that holds
   * its state has freed it. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Whether an executor can take work: `ok`; `degraded` while it recovers (a stage process being restarted: work waits
 * for it); `down` when it cannot recover (a restart failed, or stage processes kept dying past the restart budget):
 * work is refused at once and the deployment must be restarted.
 */
export type ExecutorHealth = { status: 'ok' } | { status: 'degraded' | 'down'; reason: string };

/**
 * Where requests and sessions run (docs/design.md §4, vLLM v1's Engine/Executor split): the engine front does intake,
 * queueing, admission and events; an executor runs admitted work. `InProcessExecutor` runs the graph in this process
 * on one step scheduler; `StageExecutor` (src/placement) runs it on Encode / Denoise / Decode stages. Both take plain
 * data and answer with event streams, so the front is the same whatever the topology.
 */
export interface Executor {
  /**
   * Prepares model `id` for this executor's work (in process: loads the components the deployment needs), so a
   * model that cannot load fails a request while it is still queued.
   * @throws OmniError OMNIRX_ERR_UNKNOWN_MODEL, OMNIRX_ERR_MODEL_LOAD.
   */
  prepare(model: string): Promise<void>;
  /**
   * Runs an admitted request: cold, subscribing starts it; unsubscribing cancels it at its next step boundary (its
   * buffers freed once the native call in flight returns). Failures are `failed` events, never stream errors.
   */
  execute(request: AdmittedRequest): Observable<ExecutionEvent>;
  /**
   * Opens an admitted world session (its chunk-KV slabs were reserved by the front).
   * @throws OmniError from the model's load, or the error a stage failed the open with.
   */
  openSession(session: AdmittedSession, image: SessionImage | undefined, inputs: SessionInputs): Promise<SessionExecution>;
  /** Whether it can take work now (see `ExecutorHealth`). */
  health(): ExecutorHealth;
  /** Predicted ms of `costs` on this executor's pool, when it keeps a cost model here; undefined otherwise. */
  price(costs: RequestWork['costs']): number | undefined;
  /**
   * Ends everything: running requests emit `failed` (OMNIRX_ERR_UNAVAILABLE) at their next step boundary, sessions
   * end; resolves once their native work has returned and every model and cache is freed. Idempotent.
   */
  close(): Promise<void>;
}
