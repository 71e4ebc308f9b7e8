/** The execution plane's level-2 scheduling (docs/design.md §4): the step scheduler of a worker pool and its cost model. */
export { CostModel, type CostModelOptions } from './cost-model';
export { StepScheduler, type ScheduleDecision, type ScheduleReason, type StepSchedulerOptions } from './step-scheduler';
