import { requestAdmittedEvent } from '../engine/engine';
import { denoiseWork } from '../families/wan/denoise-work';
import type { ResolvedParams } from '../pipeline/params';
import type { WanT2VPolicies } from '../families/wan/pipeline';
import type { OmniEvent } from '../request/omni-event';

/**
 * The `admitted` event of a request the stage front sends into the stages: the values actually used and the work it
 * will take (`denoiseWork`: denoise steps and DiT forwards), as the monolithic engine reports them. No `ms`
 * prediction: the cost model that learns step times lives on the Denoise stage.
 */
export function stageAdmittedEvent(requestId: string, p: ResolvedParams, nodeParams: Record<string, unknown>, policies: Pick<WanT2VPolicies, 'cfg'>): OmniEvent {
  const { steps, forwards } = denoiseWork(p, nodeParams, policies.cfg);
  return requestAdmittedEvent(requestId, p, { steps, forwards });
}
