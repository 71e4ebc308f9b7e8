import { CFGPolicy } from './cfg';
import { actionAdaLNInjector, type ConditioningInjector } from './conditioning-injector';
import { ExpertRouting } from './expert-routing';
import { FlowShiftPolicy } from './flow-shift';
import { SamplerPolicy } from './sampler-policy';

/**
 * The policies a deployment binds when it builds its pipelines (docs/design.md §3): one per slot. A family reads the
 * slots its graph uses and ignores the others; the same bag reaches every executor, so a policy chosen for the
 * deployment is the one that runs wherever its node runs.
 */
export interface PipelinePolicies {
  cfg: CFGPolicy;
  expert: ExpertRouting;
  flowShift: FlowShiftPolicy;
  sampler: SamplerPolicy;
  /** How per-frame conditioning (world-session actions) reaches the model. */
  conditioning: ConditioningInjector;
}

/** Classic CFG on every step, one transformer, the model's flow shift, Euler, adaLN action injection. */
export function defaultPolicies(): PipelinePolicies {
  return {
    cfg: CFGPolicy.classic(),
    expert: ExpertRouting.single(),
    flowShift: FlowShiftPolicy.fixed(),
    sampler: SamplerPolicy.of('euler'),
    conditioning: actionAdaLNInjector,
  };
}
