import { float32Tensor, type DiffusionStagePayload } from '../../src/pipeline/stage-payload';

/** A small valid payload: a 2×3 float32 tensor, a 5-byte uint8 tensor (padded on the wire) and metadata. */
export function samplePayload(requestId = 'r1', fill = 0): DiffusionStagePayload {
  return {
    schemaVersion: 1,
    requestId,
    sessionId: 's1',
    sourceStage: 'denoise',
    targetStage: 'decode',
    payloadType: 'wan.latents_chunk',
    tensors: {
      latents: float32Tensor(Float32Array.from([1, 2, 3, 4, 5, 6].map((v) => v + fill)), [2, 3]),
      mask: { dtype: 'uint8', shape: [5], bytes: Uint8Array.of(1, 0, 1, 0, 1) },
    },
    metadata: { chunk: fill, sigmas: [1, 0.5], nested: { ok: true, tag: null } },
  };
}
