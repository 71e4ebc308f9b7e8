import { packDecodedChunk, unpackDecodedChunk } from '../../src/placement/stage-job';
import type { AdmittedRequest } from '../../src/executor/executor';
import { PayloadError } from '../../src/pipeline/stage-payload';

const job = {
  requestId: 'r1',
  family: 'wan-t2v',
  params: {} as AdmittedRequest['params'],
  nodeParams: {},
} satisfies AdmittedRequest;
const frames = new Uint8Array(2 * 4 * 6 * 3).map((_, i) => (i * 7) & 255);
const chunk = () =>
  packDecodedChunk(job, {
    node: 'decode_video',
    artifact: { kind: 'video', width: 6, height: 4, numFrames: 2, fps: 8, frames },
    decoded: { firstFrame: 4, totalFrames: 9 },
  });

describe('omnirx.decoded_chunk payloads', () => {
  it('round-trip a decoded piece of video (frames copied)', () => {
    const p = chunk();
    const back = unpackDecodedChunk(p);
    expect(back).toEqual({
      node: 'decode_video',
      artifact: { kind: 'video', width: 6, height: 4, numFrames: 2, fps: 8, frames },
      decoded: { firstFrame: 4, totalFrames: 9 },
    });
    expect(back.artifact.frames.buffer).not.toBe(frames.buffer);
  });

  it.each<[string, (p: ReturnType<typeof chunk>) => void, RegExp]>([
    ['no metadata.chunk', (p) => delete p.metadata.chunk, /metadata\.chunk/],
    ['a chunk past the video', (p) => ((p.metadata.chunk as { firstFrame: number }).firstFrame = 8), /frames 8\.\.9 lie past the video's 9/],
    ['a negative first frame', (p) => ((p.metadata.chunk as { firstFrame: number }).firstFrame = -1), /metadata\.chunk/],
    ['an extra key', (p) => ((p.metadata.chunk as Record<string, unknown>).evil = 1), /metadata\.chunk/],
    ['frames of another shape', (p) => (p.tensors.frames = { dtype: 'uint8', shape: [1, 4, 6, 3], bytes: frames.subarray(0, 72) }), /frames/],
    ['frames of another dtype', (p) => (p.tensors.frames = { dtype: 'float32', shape: [2, 4, 6, 3], bytes: new Uint8Array(576) }), /frames/],
    ['no frames', (p) => delete p.tensors.frames, /frames/],
  ])('refuse %s with a PayloadError', (_what, spoil, message) => {
    const p = chunk();
    spoil(p);
    expect(() => unpackDecodedChunk(p)).toThrow(PayloadError);
    expect(() => unpackDecodedChunk(p)).toThrow(message);
  });
});
