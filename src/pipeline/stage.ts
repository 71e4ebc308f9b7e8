import type { Observable } from 'rxjs';
import type { Artifact } from '../request/artifacts';
import type { DecodedChunkInfo } from '../request/omni-event';
import type { StepCost } from './step-grants';

/** What every stage of a request sees: ids, the resolved parameters and the loaded model (shared). */
export interface StageContext<M, P> {
  readonly requestId: string;
  readonly model: M;
  readonly params: P;
}

/** A piece a one-shot stage streams before it finishes (decoded frames); becomes a `chunk` event of its node. */
export interface StageChunk {
  artifact: Artifact;
  /** Where a generation's decoded frames sit in its video (see `DecodedChunkInfo`). */
  decoded?: DecodedChunkInfo;
}

/**
 * A one-shot node: encoders, VAE decode, packers (docs/design.md §3). `emit`, when the runner gives it, streams
 * pieces of the output as they are ready (each becomes a `chunk` event before the node's `node_end`).
 */
export interface Stage<C, S> {
  readonly name: string;
  forward(ctx: C, state: S, emit?: (chunk: StageChunk) => void): Promise<void>;
}

/** Progress a loop step reports; becomes a `step` event. */
export interface StepProgress {
  /** 0-based index of the step that just finished. */
  index: number;
  total: number;
  /** Model timestep of the step (σ · 1000 for flow matching). */
  timestep: number;
  /** Noise level the step started from. */
  sigma: number;
}

/** The outcome of ONE loop step. `emit` carries streamed pieces (previews, decoded chunks). */
export interface StepResult {
  done: boolean;
  progress?: StepProgress;
  emit?: Artifact[];
}

/**
 * Optional batching support of a loop stage: steps of several requests with the same `batchKey` may run as one
 * call to `stepMany`, which returns one result per item (an Error fails only that item).
 */
export interface LoopBatching<C, L> {
  /** Key of shape-compatible steps, or undefined when this step cannot be batched. */
  batchKey(ctx: C, loop: L): string | undefined;
  readonly maxBatch: number;
  stepMany(items: ReadonlyArray<{ ctx: C; loop: L }>): Promise<Array<StepResult | Error>>;
}

/**
 * An iterative node: the runtime calls `step` once per grant, never the stage itself (no `for` over timesteps
 * around model calls). Per-request loop state `L` is created by `init` and freed by `release`.
 */
export interface LoopStage<C, S, L> {
  readonly name: string;
  /** Cost-model key of the loop's next step. */
  cost(ctx: C, loop: L): StepCost;
  /** Steps still to run (for estimates). */
  remaining(loop: L): number;
  readonly batching?: LoopBatching<C, L>;
  init(ctx: C, state: S): Promise<L> | L;
  step(ctx: C, loop: L): Promise<StepResult> | Observable<StepResult>;
  /** Writes the loop's final outputs into the request state. */
  finalize(ctx: C, loop: L, state: S): Promise<void> | void;
  /** Frees the loop state; called once, after the last step settled, whether the loop finished or not. */
  release(loop: L): void;
}
