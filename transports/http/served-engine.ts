import type { Observable } from 'rxjs';
import type { WanT2VModel } from '../../src/models/wan/wan-t2v';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import type { WorldSession } from '../../src/engine/session';
import type { SessionRequestInput } from '../../src/request/session-request';

/** What the HTTP server needs of an `Engine` (the real one satisfies it; see src/engine/engine.ts). */
export interface ServedEngine {
  /** Cold stream of one request's events; subscribing submits, unsubscribing cancels at the next step boundary. */
  generate(request: OmniRequestInput): Observable<OmniEvent>;
  /** Ids of the models the engine can serve. */
  listModels(): string[];
  /** Requests waiting for admission, and running. */
  stats(): { queued: number; running: number };
  /** The model registry: `get(id)` loads (once) and returns a model, or rejects with OMNIRX_ERR_UNKNOWN_MODEL. */
  readonly models: { get(id: string | undefined): Promise<WanT2VModel>; readonly defaultModel?: string; readonly modelsDir?: string };
  /** Opens an interactive world session (rejects with an OmniError naming the field for bad input). */
  session(input: SessionRequestInput): Promise<WorldSession>;
  /** Stops admitting and frees every model. */
  close(): Promise<void>;
}
