/** omnirx public API. */
export { Engine, type EngineOptions } from './engine/engine';
export { OmniRequestSchema, createOmniRequestSchema, type OmniRequest, type OmniRequestInput, type Task } from './request/omni-request';
export { OmniEventSchema, type OmniEvent, type OmniOutput, type StepEvent, type ErrorEvent } from './request/omni-event';
export type { Artifact, VideoArtifact, ImageArtifact, LatentsArtifact } from './request/artifacts';
export { DEFAULT_LIMITS, type RequestLimits } from './request/limits';
export { OmniError, ERROR_CATALOGUE, type ErrorCode } from './errors';
export { encodeMp4 } from './media/mp4';
export { driveLoop } from '../operators';
export { CFGPolicy } from './pipeline/policies/cfg';
export { ExpertRouting } from './pipeline/policies/expert-routing';
export { FlowShiftPolicy } from './pipeline/policies/flow-shift';
export { buildPipeline, type PipelineSpec, type NodeSpec, type BuiltPipeline } from './pipeline/spec';
export { StepScheduler, CostModel } from './executor/scheduler';
export { AdmissionPlanner } from './engine/admission-planner';
