/**
 * `omnirx`: the engine, its request and event schemas, errors, and the built-in model families
 * (docs/design.md; the operators are `omnirx/operators`, the pipeline plane `omnirx/pipeline`, the family
 * registration API `omnirx/families`, the HTTP / WebSocket / WebRTC server `omnirx/server`).
 */
export { Engine, deployOptions, requestAdmittedEvent, RequestStatus, type EngineOptions } from './engine/engine';
export { WorldSession, type WorldSessionParams, type WorldSessionStats } from './engine/session';
export { EngineMetrics, processMetrics, type EngineMetricsOptions, type MeteredEngine } from './engine/engine-metrics';
export type { RequestWatch, RequestWatcher } from './engine/request-watch';
export { AdmissionPlanner } from './engine/admission-planner';
export type { AdmittedRequest, ExecutionEvent, ExecutionFailure, Executor, SessionExecution, SessionInputs } from './executor/executor';
export { InProcessExecutor } from './executor/in-process';
export { CostModel, StepScheduler, type ScheduleDecision } from './executor/scheduler';
export { OmniRequestSchema, createOmniRequestSchema, TaskSchema, type OmniRequest, type OmniRequestInput, type Task } from './request/omni-request';
export { OmniEventSchema, type OmniEvent, type OmniOutput, type StepEvent, type ChunkEvent, type ErrorEvent } from './request/omni-event';
export {
  SessionRequestSchema,
  SessionActionSchema,
  createSessionRequestSchema,
  type SessionRequest,
  type SessionRequestInput,
  type SessionAction,
} from './request/session-request';
export { ActionSchema, ACTION_KEYS, ACTION_VECTOR_MAX_ABS, type Action, type ActionKey } from './request/action';
export type { Artifact, VideoArtifact, ImageArtifact, LatentsArtifact } from './request/artifacts';
export { DEFAULT_LIMITS, type RequestLimits } from './request/limits';
export { OmniError, ERROR_CATALOGUE, type ErrorCode } from './errors';
export { loadDeployConfig, parseDeployConfig, DeployConfigSchema, type DeployConfig, type DeployConfigInput, type DeployTask } from './placement/deploy-config';
export { TopologySchema, type Topology, type TopologyInput } from './placement/topology';
export { StageExecutor } from './placement/stage-executor';
export type { StageHosting, StageSink } from './placement/stage-hosting';
export type { StageMemory } from './placement/stage-host';
export type { StageProcesses, StageProcessMemory } from './placement/stage-processes';
export { CFGPolicy } from './pipeline/policies/cfg';
export { ExpertRouting } from './pipeline/policies/expert-routing';
export { FlowShiftPolicy } from './pipeline/policies/flow-shift';
export { SamplerPolicy } from './pipeline/policies/sampler-policy';
export { actionAdaLNInjector, type ConditioningInjector } from './pipeline/policies/conditioning-injector';
export { defaultPolicies, type PipelinePolicies } from './pipeline/policies/policies';
export { builtinFamilies } from './families';
export { encodeMp4 } from './media/mp4';
