/** The execution plane's level-2 scheduling (DESIGN.md §4): step scheduler, cost model, memory admission. */
export { AdmissionPlanner, type AdmissionDecision, type MemoryClaim } from './admission';
export { CostModel, type CostKey, type CostModelOptions } from './cost-model';
export { StepScheduler, type BatchRunner, type ScheduleDecision, type ScheduleReason, type StepRequest, type StepSchedulerOptions } from './step-scheduler';
