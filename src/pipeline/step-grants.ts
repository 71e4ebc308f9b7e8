import type { Observable, ObservableInput } from 'rxjs';

/**
 * What one step costs is keyed by what determines its work (docs/design.md §4): the model, the phase of the pipeline
 * (`denoise`, `decode`, `prefill`, …), the shape bucket (e.g. `480x832x21`) and the guidance mode (`cfg`,
 * `cfg-batched`, `none`, …). A denoise step's cost is flat across the steps of a request, so one number per key
 * is enough.
 */
export interface StepCost {
  model: string;
  phase: string;
  shape: string;
  guidance: string;
}

/** One ready loop step of one request, handed to the pool's scheduler by the engine. */
export interface StepRequest<R> {
  requestId: string;
  /** Larger runs first. */
  priority: number;
  /** What the step costs (the cost model's key); its measured time calibrates the model. */
  cost: StepCost;
  /** Runs ONE step (not started until granted). The first value is the result; further values are ignored. */
  run(): ObservableInput<R>;
  /** Optional: steps with the same batch key may run together through the runner (e.g. T2I steps at one resolution). */
  batch?: { key: string; item: unknown; runner: BatchRunner };
}

/** Runs several batch-compatible steps as one forward. */
export interface BatchRunner {
  maxBatch: number;
  /** Runs several steps as one; returns one result per item, in order; an Error in a slot fails only that item. */
  run(items: unknown[]): ObservableInput<unknown[]>;
}

/**
 * Grants loop steps one at a time (docs/design.md §4, level 2): a loop asks for its next step by subscribing to `step(...)`,
 * and the step runs when the pool's scheduler grants it (`StepScheduler`, src/executor/scheduler). The graph runner and
 * families' session rollouts are written against this interface, so the pipeline plane never names the scheduler.
 */
export interface StepGrants {
  /** Cold: subscribing queues the step; it runs when granted; its first value is the result. Unsubscribing withdraws it. */
  step<R>(req: StepRequest<R>): Observable<R>;
  /** Forgets a finished request's attained service. */
  forget(requestId: string): void;
}
