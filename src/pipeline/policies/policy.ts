/**
 * A policy is a plain object bound to a loop node when the pipeline is built (docs/design.md §3, seed §6.2.3). It owns
 * one named slot of the denoise step; per-request state lives in the loop state created at `init`, never in the
 * policy instance, so two interleaved requests cannot share anything through it. `build()` rejects two policies
 * claiming the same slot on one node.
 */
export type PolicySlot = 'guidance' | 'expert' | 'flow_shift' | 'sampler' | 'conditioning';

export interface Policy {
  readonly slot: PolicySlot;
  /** Short name for logs, cost keys and errors (e.g. 'classic-cfg'). */
  readonly name: string;
}
