import type { Observable } from 'rxjs';
import type { WorldSessionHandle } from '../../src/engine/session';
import type { ExecutorHealth } from '../../src/executor/executor';
import type { ModelSpecBase } from '../../src/pipeline/family/model-spec';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import type { SessionRequestInput } from '../../src/request/session-request';

/** What the transports read of a served model: its spec (id, defaults), never its weights. */
export interface ServedModel {
  readonly spec: ModelSpecBase;
}

/**
 * What the transports need of an engine: `Engine` (src/engine/engine.ts) satisfies it, whatever its topology.
 */
export interface ServedEngine {
  /** Cold stream of one request's events; subscribing submits, unsubscribing cancels at the next step boundary. */
  generate(request: OmniRequestInput): Observable<OmniEvent>;
  /** Ids of the models the engine can serve. */
  listModels(): string[];
  /** Requests waiting for admission, and running. */
  stats(): { queued: number; running: number };
  /** Whether it takes work: `degraded` while a stage process restarts, `down` when the stages cannot recover. */
  health(): ExecutorHealth;
  /** The models: `get(id)` resolves model `id` (the default when undefined), or rejects with OMNIRX_ERR_UNKNOWN_MODEL. */
  readonly models: { get(id: string | undefined): Promise<ServedModel>; readonly defaultModel?: string; readonly modelsDir?: string };
  /** Opens an interactive world session (rejects with an OmniError naming the field for bad input). */
  session(input: SessionRequestInput): Promise<WorldSessionHandle>;
  /** Stops admitting and frees every model. */
  close(): Promise<void>;
}
