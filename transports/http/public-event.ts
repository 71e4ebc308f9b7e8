import type { Artifact } from '../../src/request/artifacts';
import type { OmniEvent } from '../../src/request/omni-event';

/** What a client sees of an artifact on the event stream: its shape, never its pixels. */
export type ArtifactSummary =
  | { kind: 'video'; width: number; height: number; numFrames: number; fps: number }
  | { kind: 'image'; width: number; height: number }
  | { kind: 'latents'; shape: number[] };

/** A JSON-safe OmniEvent for SSE: artifacts summarised, every other field as the engine sent it. */
export type PublicEvent = { type: string; requestId: string } & Record<string, unknown>;

/** The shape of an artifact without its data (a chunk preview is metadata, never a base64 frame dump). */
export function summarizeArtifact(a: Artifact): ArtifactSummary {
  if (a.kind === 'video') return { kind: 'video', width: a.width, height: a.height, numFrames: a.numFrames, fps: a.fps };
  if (a.kind === 'image') return { kind: 'image', width: a.width, height: a.height };
  return { kind: 'latents', shape: [...a.shape] };
}

function summarizeAll(arts: Record<string, Artifact>): Record<string, ArtifactSummary> {
  return Object.fromEntries(Object.entries(arts).map(([k, v]) => [k, summarizeArtifact(v)]));
}

/** Converts an engine event to its JSON-safe public form (no typed arrays; sizes stay small). */
export function publicEvent(ev: OmniEvent): PublicEvent {
  switch (ev.type) {
    case 'chunk':
      return { type: 'chunk', requestId: ev.requestId, node: ev.node, artifact: summarizeArtifact(ev.artifact) };
    case 'artifact':
      return { type: 'artifact', requestId: ev.requestId, name: ev.name, artifact: summarizeArtifact(ev.artifact) };
    case 'final':
      return { type: 'final', requestId: ev.requestId, seed: ev.output.seed, ms: ev.output.ms, artifacts: summarizeAll(ev.output.artifacts) };
    case 'error': {
      const { partial, ...rest } = ev;
      return partial === undefined ? { ...rest } : { ...rest, partial: summarizeAll(partial) };
    }
    default:
      return { ...ev };
  }
}
