/**
 * `omnirx/pipeline`: the pipeline plane (docs/design.md §3) — the stage contracts, the `PipelineSpec` builder and the
 * graph runner that drives a request's nodes (loop steps granted one at a time by a `StepGrants`), the policies bound
 * at build, the samplers, and the stage payload a family hands between Encode, Denoise and Decode.
 */
export type { Stage, LoopStage, LoopBatching, StepResult, StepProgress, StageContext } from './stage';
export { buildPipeline, type PipelineSpec, type NodeSpec, type NodeRun, type BuiltPipeline, type ComponentSpec, type ArtifactType } from './spec';
export { runGraph, type GraphEvent, type StepRouting } from './graph-runner';
export type { StepGrants, StepRequest, StepCost, BatchRunner } from './step-grants';
export { RequestState } from './request-state';
export { ResolvedParamsSchema, type ResolvedParams } from './params';
export { SessionConfigSchema, type SessionConfig } from './session-config';
export { CFGPolicy, type GuidanceDispatch, type GuidancePlan } from './policies/cfg';
export { ExpertRouting } from './policies/expert-routing';
export { FlowShiftPolicy } from './policies/flow-shift';
export { SamplerPolicy, SAMPLER_NAMES, type SamplerName } from './policies/sampler-policy';
export { actionAdaLNInjector, type ConditioningInjector } from './policies/conditioning-injector';
export { defaultPolicies, type PipelinePolicies } from './policies/policies';
export type { Policy, PolicySlot } from './policies/policy';
export { applyClassifierFreeGuidance, firstNonFinite } from './guidance';
export { flowMatchSigmas, eulerStep, stochasticEulerStep } from './samplers/flow-match-euler';
export { flowMatchEulerSampler, type Sampler, type SamplerState } from './samplers/sampler';
export { uniPC, uniPCSampler, uniPCSigmas, type UniPCOptions, type UniPCSampler } from './samplers/unipc';
export { dmd, dmdSampler, dmdSigmas, DEFAULT_DMD_TIMESTEPS, type DmdOptions, type DmdSampler } from './samplers/dmd';
export {
  PAYLOAD_SCHEMA_VERSION,
  RUNTIME_PAYLOAD,
  SESSION_PAYLOAD,
  PayloadError,
  expectTensor,
  float32Elements,
  float32Tensor,
  parseStagePayload,
  sessionPayload,
  type DiffusionStagePayload,
  type PayloadTensor,
  type StageRole,
} from './stage-payload';
