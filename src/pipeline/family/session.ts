import type { Observable } from 'rxjs';
import { z } from 'zod';
import type { CacheManager } from '../../cache/cache-manager';
import type { NativeBinding } from '../../native/binding';
import { EtaSchema } from '../../request/eta';
import type { OmniEvent } from '../../request/omni-event';
import { SessionActionSchema, type SessionAction } from '../../request/session-request';
import type { ConditioningInjector } from '../policies/conditioning-injector';
import type { DiffusionStagePayload, StageRole } from '../stage-payload';
import type { StepGrants } from '../step-grants';
import type { LoadedModel } from './model';

/** Name of a world session's loop node in its `step` and `chunk` events. */
export const ROLLOUT_NODE = 'chunk_rollout';

/** A world session's values after the model's defaults: pixels, frames per second, the seed actually used, η. */
export interface ResolvedSessionParams {
  width: number;
  height: number;
  /** PTS rate of the emitted frames, frames per second. */
  fps: number;
  seed: number;
  flowShift: number;
  /** Share of fresh noise re-noising each Euler step of every chunk, [0, 1]. */
  eta: number;
  priority: number;
}

/**
 * An admitted world session as an executor receives it: plain, structured-clone-safe data (it travels to stage
 * processes in payload metadata). The front resolved it against the model (`FamilySessions.resolve`) and the
 * deployment's `sessions` settings, and reserved its chunk-KV slabs. Units: pixels, frames per second, latent frames.
 */
export const AdmittedSessionSchema = z.strictObject({
  sessionId: z.string().min(1).max(128),
  family: z.string().min(1).max(64),
  model: z.string().min(1).max(128),
  prompt: z.string().max(100_000),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  fps: z.number().positive(),
  seed: z.number().int().nonnegative(),
  flowShift: z.number().positive(),
  eta: EtaSchema,
  priority: z.number().int(),
  /** The action a chunk uses before the first one arrives. */
  initialAction: SessionActionSchema,
  chunkFrames: z.number().int().min(1),
  sinkFrames: z.number().int().min(0),
  localWindowFrames: z.number().int().min(0),
  steps: z.number().int().min(1),
  firstChunkSteps: z.number().int().min(1),
});
export type AdmittedSession = z.infer<typeof AdmittedSessionSchema>;

/** Image-to-world: the first frame, RGB24 `[height, width, 3]`, at the session's size. */
export interface SessionImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** What a session's execution reports: a denoise step of the chunk in flight, or a decoded chunk. */
export type SessionExecutionEvent =
  | { type: 'step'; index: number; total: number; timestep: number; sigma: number; ms: number }
  | {
      type: 'chunk';
      /** Index of the chunk in the session (0, 1, …). */
      chunk: number;
      /** Index of the chunk's first video frame in the session. */
      firstFrame: number;
      /** RGB24 frames `[C, H, W, 3]`. */
      frames: Uint8Array<ArrayBuffer>;
      /** The action the chunk was generated with. */
      action: SessionAction;
    };

/** What an in-process session rollout of a family uses of its executor. */
export interface SessionEnv {
  native: NativeBinding;
  model: LoadedModel;
  /** The pool's step grants: every denoise step, decode and commit is one grant, interleaved with other requests. */
  steps: StepGrants;
  caches: CacheManager;
  conditioning: ConditioningInjector;
}

/**
 * One open world session of a family, in process (the executor drives it): a chunked causal rollout. Per chunk,
 * `chunk$(index, action)` runs its denoise steps, decode and commit as step grants, emitting `step` events and one
 * `chunk` event. While `denoising` is true, re-subscribing `chunk$` for the same index (a flush) starts the chunk
 * again with the new action from the same noise.
 */
export interface SessionRollout {
  chunk$(index: number, action: SessionAction): Observable<SessionExecutionEvent>;
  /** Whether the chunk in flight is still in its denoise steps (a flush can redo it). */
  readonly denoising: boolean;
  /** Native bytes the rollout holds (KV cache, plans, decoder state) and bytes of its chunk-KV slabs. */
  stats(): { nativeBytes: number; slabBytes: number };
  /** Frees everything once in-flight native work settles. Idempotent. */
  release(): Promise<void>;
}

/** A stage's progress on a request or session: the `node_start`, `step` and `node_end` events it emits as it runs. */
export type StageProgress = Extract<OmniEvent, { type: 'node_start' | 'step' | 'node_end' }>;

/** What a family's session handler on one stage uses. */
export interface SessionStageEnv {
  role: StageRole;
  native: NativeBinding;
  /** The model `id` with this stage's components loaded. */
  model(id: string): Promise<LoadedModel>;
  steps: StepGrants;
  /** The stage's cache pools (the Denoise stage's chunk-KV slabs, with the deployment's budgets). */
  caches: CacheManager;
  conditioning: ConditioningInjector;
}

/**
 * A family's world-session work on one stage of a disaggregated topology. Session payloads (`SESSION_PAYLOAD` from the
 * front, and the family's own between stages) carry `sessionId`; the handler keeps the session's local state by it.
 */
export interface SessionStageHandler {
  /** Whether `p` is a session payload this handler takes. */
  claims(p: DiffusionStagePayload): boolean;
  /**
   * Runs one session payload, putting what it produces through `emit` (awaited: credit flow control applies) and
   * reporting the session's denoise steps through `report`.
   * @throws PayloadError for a malformed payload or an unknown session; model and native errors of the session.
   */
  handle(p: DiffusionStagePayload, emit: (out: DiffusionStagePayload) => Promise<void>, report: (ev: StageProgress) => void): Promise<void>;
  /** Sessions whose state lives here, and the chunk-KV slabs they hold. */
  stats(): { open: number; chunkKvSlabs: number };
  /** Frees every session's state (stage shutdown). */
  close(): Promise<void>;
}
