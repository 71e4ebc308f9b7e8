import type { ImageArtifact, LatentsArtifact, VideoArtifact } from '../../src/request/artifacts';
import { OmniEventSchema, type OmniEvent } from '../../src/request/omni-event';

const video: VideoArtifact = { kind: 'video', width: 4, height: 2, numFrames: 1, fps: 16, frames: new Uint8Array(4 * 2 * 3) };
const image: ImageArtifact = { kind: 'image', width: 4, height: 2, pixels: new Uint8Array(4 * 2 * 3) };
const latents: LatentsArtifact = { kind: 'latents', shape: [16, 1, 2, 2], data: new Float32Array(64) };

/** One valid example of every event type. */
const EXAMPLES: OmniEvent[] = [
  { type: 'queued', requestId: 'r1', position: 0 },
  {
    type: 'admitted',
    requestId: 'r1',
    model: 'omnirx-default',
    params: { task: 'T2V', width: 64, height: 64, numFrames: 5, fps: 16, numInferenceSteps: 4, guidanceScale: 5, flowShift: 3, seed: 42 },
    estimate: { steps: 4, forwards: 8 },
  },
  { type: 'node_start', requestId: 'r1', node: 'denoise' },
  { type: 'node_end', requestId: 'r1', node: 'denoise', ms: 12.5 },
  { type: 'step', requestId: 'r1', node: 'denoise', index: 0, total: 4, timestep: 999, sigma: 1, ms: 3.2 },
  { type: 'chunk', requestId: 'r1', node: 'decode', artifact: video },
  { type: 'artifact', requestId: 'r1', name: 'latents', artifact: latents },
  { type: 'final', requestId: 'r1', output: { requestId: 'r1', artifacts: { video, image, latents }, seed: 42, ms: 100 } },
  {
    type: 'error',
    requestId: 'r1',
    code: 'OMNIRX_ERR_INVALID_REQUEST',
    message: 'diffusion.width: too small',
    param: 'diffusion.width',
    issues: [{ path: 'diffusion.width', code: 'too_small', message: 'too small' }],
  },
  { type: 'error', requestId: 'r1', code: 'OMNIRX_ERR_NON_FINITE', message: 'NaN', node: 'denoise', partial: { image }, completedSteps: 2 },
  { type: 'cancelled', requestId: 'r1', completedSteps: 3 },
];

function issuesOf(input: unknown): { path: string; code: string }[] {
  const r = OmniEventSchema.safeParse(input);
  expect(r.success).toBe(false);
  if (r.success) return [];
  return r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), code: i.code }));
}

describe('OmniEventSchema', () => {
  it('has an example of every event type', () => {
    const types = new Set(EXAMPLES.map((e) => e.type));
    expect([...types].sort()).toEqual([...OmniEventSchema.options.map((o) => o.shape.type.value)].sort());
  });

  it.each(EXAMPLES.map((e) => [e.type, e] as const))('accepts an event of type %s', (_type, event) => {
    const r = OmniEventSchema.safeParse(event);
    expect(r.error?.issues).toBeUndefined();
    expect(r.success).toBe(true);
  });

  it('keeps typed arrays by reference', () => {
    const r = OmniEventSchema.parse({ type: 'chunk', requestId: 'r1', node: 'decode', artifact: video });
    expect(r.type === 'chunk' && r.artifact.kind === 'video' && r.artifact.frames).toBe(video.frames);
  });

  it('accepts a Buffer as video frames (a Uint8Array subclass)', () => {
    expect(OmniEventSchema.safeParse({ type: 'chunk', requestId: 'r1', node: 'decode', artifact: { ...video, frames: Buffer.alloc(24) } }).success).toBe(true);
  });

  it.each([['nope'], ['Queued'], [''], [undefined], [7]])('rejects type %p', (type) => {
    expect(issuesOf({ type, requestId: 'r1', position: 0 })).toEqual([{ path: 'type', code: 'invalid_union' }]);
  });

  it('rejects a missing or non-string requestId', () => {
    expect(issuesOf({ type: 'queued', position: 0 })).toEqual([{ path: 'requestId', code: 'invalid_type' }]);
    expect(issuesOf({ type: 'cancelled', requestId: 1, completedSteps: 0 })).toEqual([{ path: 'requestId', code: 'invalid_type' }]);
  });

  it('rejects an unknown artifact kind', () => {
    expect(issuesOf({ type: 'chunk', requestId: 'r1', node: 'decode', artifact: { kind: 'audio', samples: new Float32Array(4) } })).toEqual([
      { path: 'artifact.kind', code: 'invalid_union' },
    ]);
  });

  it('rejects a video artifact whose frames is a number[]', () => {
    expect(issuesOf({ type: 'chunk', requestId: 'r1', node: 'decode', artifact: { ...video, frames: [0, 1, 2] } })).toEqual([
      { path: 'artifact.frames', code: 'invalid_type' },
    ]);
  });

  it('rejects latents whose data is not a Float32Array', () => {
    expect(issuesOf({ type: 'artifact', requestId: 'r1', name: 'latents', artifact: { ...latents, data: new Uint8Array(4) } })).toEqual([
      { path: 'artifact.data', code: 'invalid_type' },
    ]);
    expect(issuesOf({ type: 'artifact', requestId: 'r1', name: 'latents', artifact: { ...latents, data: new Float64Array(4) } })).toEqual([
      { path: 'artifact.data', code: 'invalid_type' },
    ]);
  });

  it('rejects a mismatched artifact inside a final output', () => {
    expect(
      issuesOf({ type: 'final', requestId: 'r1', output: { requestId: 'r1', artifacts: { video: { ...video, kind: 'image' } }, seed: 1, ms: 1 } }),
    ).toEqual([
      { path: 'output.artifacts.video.pixels', code: 'invalid_type' },
      { path: 'output.artifacts.video', code: 'unrecognized_keys' },
    ]);
  });

  it('rejects unknown keys and out-of-range numbers', () => {
    expect(issuesOf({ type: 'queued', requestId: 'r1', position: 0, extra: 1 })).toEqual([{ path: '', code: 'unrecognized_keys' }]);
    expect(issuesOf({ type: 'queued', requestId: 'r1', position: -1 })).toEqual([{ path: 'position', code: 'too_small' }]);
    expect(issuesOf({ type: 'step', requestId: 'r1', node: 'd', index: 0, total: 0, timestep: 1, sigma: 1, ms: 0 })).toEqual([
      { path: 'total', code: 'too_small' },
    ]);
    expect(issuesOf({ type: 'node_end', requestId: 'r1', node: 'd', ms: NaN })).toEqual([{ path: 'ms', code: 'invalid_type' }]);
  });
});
