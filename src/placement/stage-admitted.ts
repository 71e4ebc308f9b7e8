import type { ResolvedParams } from '../pipeline/params';
import type { DenoiseNodeParams } from '../pipeline/wan-t2v/denoise-loop';
import type { WanT2VPolicies } from '../pipeline/wan-t2v/pipeline';
import type { OmniEvent } from '../request/omni-event';

/**
 * The `admitted` event of a request the stage front sends into the stages: the values actually used (as the
 * monolithic engine reports them) and the work it will take — denoise steps (a custom sigma schedule's length − 1,
 * else `numInferenceSteps`) and DiT forwards (two per step under classifier-free guidance). No `ms` prediction: the
 * cost model that learns step times lives on the Denoise stage.
 */
export function stageAdmittedEvent(requestId: string, p: ResolvedParams, nodeParams: Record<string, unknown>, policies: Pick<WanT2VPolicies, 'cfg'>): OmniEvent {
  const custom = (nodeParams.denoise as DenoiseNodeParams | undefined)?.sigmas;
  const steps = custom !== undefined ? custom.length - 1 : p.numInferenceSteps;
  const forwards = steps * (policies.cfg.needsNegative(p.guidanceScale) ? 2 : 1);
  const { task, model, width, height, numFrames, fps, numInferenceSteps, guidanceScale, flowShift, sampler, seed, priority } = p;
  return {
    type: 'admitted',
    requestId,
    model,
    params: { task, width, height, numFrames, fps, numInferenceSteps, guidanceScale, flowShift, sampler, seed, priority },
    estimate: { steps, forwards },
  };
}
