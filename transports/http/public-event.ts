import type { Artifact } from '../../src/request/artifacts';
import type { OmniEvent } from '../../src/request/omni-event';
import { encodePng, thumbnail } from '../../src/media/png';

/** What a client sees of an artifact on the event stream: its shape, never its pixels. */
export type ArtifactSummary =
  | { kind: 'video'; width: number; height: number; numFrames: number; fps: number }
  | { kind: 'image'; width: number; height: number }
  | { kind: 'latents'; shape: number[] };

/** Longest side of a preview's PNG on the event stream, pixels (a job keeps its event history for late subscribers). */
export const PREVIEW_MAX_SIDE = 128;

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
      // A generation's preview (an image: the first frame a denoise step predicts) carries a small PNG to show.
      if (ev.artifact.kind === 'image' && ev.rollout === undefined) {
        const thumb = thumbnail(ev.artifact, PREVIEW_MAX_SIDE);
        return {
          type: 'chunk',
          requestId: ev.requestId,
          node: ev.node,
          artifact: summarizeArtifact(ev.artifact),
          preview: { width: thumb.width, height: thumb.height, png_b64: encodePng(thumb).toString('base64') },
        };
      }
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
