import type { Observable } from 'rxjs';
import { OmniError } from '../errors';
import type { ModelRegistry } from '../models/registry';
import type { OmniEvent } from '../request/omni-event';
import type { OmniRequestInput } from '../request/omni-request';
import type { SessionRequestInput } from '../request/session-request';
import type { StagePipeline } from './in-process-stages';
import type { StageSession } from './stage-session';

/**
 * A disaggregated deployment as a server serves it: the surface of `Engine` that the transports use (generate,
 * models, stats, sessions, close), answered by the stage front. Models resolve from their `model.json` only
 * (`specOnlyRegistry`): this side of the deployment loads no weights.
 */
export class StageDeployment {
  readonly topology = 'disaggregated' as const;

  /**
   * @param stages the running stages (in process or stage processes) and their front.
   * @param servesWorld whether the deploy config's tasks include WORLD (else `session` is refused).
   */
  constructor(
    readonly stages: Pick<StagePipeline, 'front' | 'close'>,
    private readonly servesWorld: boolean,
  ) {}

  /** Spec-only models (see `specOnlyRegistry`). */
  get models(): ModelRegistry {
    return this.stages.front.models;
  }

  /** Runs one request through the stages (cold, like `Engine.generate`). */
  generate(input: OmniRequestInput): Observable<OmniEvent> {
    return this.stages.front.generate(input);
  }

  /** Ids of the models found in the models folder. */
  listModels(): string[] {
    return this.models.list();
  }

  /** Requests not yet taken by the Encode stage (`queued`), and requests held by a stage (`running`). */
  stats(): { queued: number; running: number } {
    return this.stages.front.stats();
  }

  /**
   * Opens a world session across the stages (see `StageFront.session`).
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (`param` "task") when the deployment does not serve WORLD, and
   *   whatever `StageFront.session` throws.
   */
  async session(input: SessionRequestInput): Promise<StageSession> {
    if (!this.servesWorld) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', 'this deployment does not serve world sessions (add WORLD to its tasks)', { param: 'task' });
    return this.stages.front.session(input);
  }

  /** Stops the front (pending requests fail with OMNIRX_ERR_UNAVAILABLE, sessions end) and the stages. */
  close(): Promise<void> {
    return this.stages.close();
  }
}
