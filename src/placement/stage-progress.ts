import type { OmniEvent } from '../request/omni-event';

/**
 * Progress a stage reports for a request or a world session while it works on it: `node_start`, `step` (one per
 * loop step: node, 0-based index, total, timestep, sigma, wall time in ms) and `node_end` (wall time in ms) — the
 * events the monolithic engine emits for the same nodes. `requestId` is the request's id, or the session's id.
 * Progress travels beside the payloads (a callback in process, an IPC message from a stage process), never through
 * the links, so reporting it takes no link credit and never slows a stage.
 */
export type StageProgress = Extract<OmniEvent, { type: 'node_start' | 'step' | 'node_end' }>;

/** Whether `ev` is a progress event a stage reports to the front. */
export function isStageProgress(ev: OmniEvent): ev is StageProgress {
  return ev.type === 'node_start' || ev.type === 'step' || ev.type === 'node_end';
}
