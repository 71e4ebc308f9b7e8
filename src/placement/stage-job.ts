import { z } from 'zod';
import type { AdmittedRequest } from '../executor/executor';
import { ResolvedParamsSchema } from '../pipeline/params';
import {
  expectTensor,
  float32Elements,
  float32Tensor,
  PAYLOAD_SCHEMA_VERSION,
  PayloadError,
  RUNTIME_PAYLOAD,
  type DiffusionStagePayload,
  type PayloadTensor,
  type StageRole,
} from '../pipeline/stage-payload';
import type { Artifact, VideoArtifact } from '../request/artifacts';
import type { DecodedChunkInfo } from '../request/omni-event';

/** `metadata.job` of every request payload: the admitted request as the stages need it (validated again on arrival). */
const JobSchema = z.strictObject({ family: z.string().min(1).max(64), params: ResolvedParamsSchema, nodeParams: z.record(z.string(), z.unknown()) });

/**
 * A payload of request `job` from `source` to `target`, its job in `metadata.job` beside `extra`: the runtime's own
 * request and outputs payloads, and the families' hand-offs between stages, all carry it.
 */
export function jobPayload(
  job: AdmittedRequest,
  source: StageRole,
  target: StageRole,
  payloadType: string,
  tensors: Record<string, PayloadTensor>,
  extra: Record<string, unknown> = {},
): DiffusionStagePayload {
  return {
    schemaVersion: PAYLOAD_SCHEMA_VERSION,
    requestId: job.requestId,
    sourceStage: source,
    targetStage: target,
    payloadType,
    tensors,
    metadata: { job: { family: job.family, params: job.params, nodeParams: job.nodeParams }, ...extra },
  };
}

/**
 * The admitted request a payload carries.
 * @throws PayloadError when `metadata.job` is missing or malformed (naming the field).
 */
export function unpackJob(p: DiffusionStagePayload): AdmittedRequest {
  const r = JobSchema.safeParse(p.metadata.job);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new PayloadError(`${p.payloadType}: metadata.job.${issue.path.map(String).join('.')}: ${issue.message}`, { param: 'metadata.job' });
  }
  return { requestId: p.requestId, family: r.data.family, params: r.data.params, nodeParams: r.data.nodeParams };
}

/** A request entering the stages (front → Encode): no tensors, the job in metadata. Source and target are both `encode`. */
export function packRequest(job: AdmittedRequest): DiffusionStagePayload {
  return jobPayload(job, 'encode', 'encode', RUNTIME_PAYLOAD.request, {});
}

/**
 * Decode → front: the request's artifacts. `video.frames` / `image.pixels` are uint8 RGB24 `[F, H, W, 3]` /
 * `[H, W, 3]`, `latents` float32 of the artifact's shape; sizes and fps ride in `metadata.artifacts`.
 */
export function packOutputs(job: AdmittedRequest, artifacts: Readonly<Record<string, Artifact>>): DiffusionStagePayload {
  const tensors: Record<string, PayloadTensor> = {};
  const meta: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(artifacts)) {
    if (a.kind === 'video') {
      tensors[`${name}.frames`] = { dtype: 'uint8', shape: [a.numFrames, a.height, a.width, 3], bytes: a.frames };
      meta[name] = { kind: 'video', width: a.width, height: a.height, numFrames: a.numFrames, fps: a.fps };
    } else if (a.kind === 'image') {
      tensors[`${name}.pixels`] = { dtype: 'uint8', shape: [a.height, a.width, 3], bytes: a.pixels };
      meta[name] = { kind: 'image', width: a.width, height: a.height };
    } else {
      tensors[`${name}.data`] = float32Tensor(a.data, a.shape);
      meta[name] = { kind: 'latents', shape: a.shape };
    }
  }
  return jobPayload(job, 'decode', 'decode', RUNTIME_PAYLOAD.outputs, tensors, { artifacts: meta });
}

const ArtifactMetaSchema = z.record(
  z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/),
  z.discriminatedUnion('kind', [
    z.strictObject({
      kind: z.literal('video'),
      width: z.number().int().positive(),
      height: z.number().int().positive(),
      numFrames: z.number().int().positive(),
      fps: z.number().positive(),
    }),
    z.strictObject({ kind: z.literal('image'), width: z.number().int().positive(), height: z.number().int().positive() }),
    z.strictObject({ kind: z.literal('latents'), shape: z.array(z.number().int().nonnegative()).max(8) }),
  ]),
);

/**
 * The artifacts of an outputs payload (copies, so the payload's buffer may be dropped).
 * @throws PayloadError for a wrong payload type, malformed `metadata.artifacts` or a tensor that does not match it.
 */
export function unpackOutputs(p: DiffusionStagePayload): Record<string, Artifact> {
  if (p.payloadType !== RUNTIME_PAYLOAD.outputs)
    throw new PayloadError(`expected an ${RUNTIME_PAYLOAD.outputs} payload, got ${p.payloadType}`, { param: 'payloadType' });
  const r = ArtifactMetaSchema.safeParse(p.metadata.artifacts);
  if (!r.success) throw new PayloadError(`${RUNTIME_PAYLOAD.outputs}: metadata.artifacts: ${r.error.issues[0].message}`, { param: 'metadata.artifacts' });
  const artifacts: Record<string, Artifact> = {};
  for (const [name, m] of Object.entries(r.data)) {
    if (m.kind === 'video') {
      const t = expectTensor(p.tensors[`${name}.frames`], `${name}.frames`, 'uint8', [m.numFrames, m.height, m.width, 3]);
      artifacts[name] = { ...m, frames: t.bytes.slice() };
    } else if (m.kind === 'image') {
      const t = expectTensor(p.tensors[`${name}.pixels`], `${name}.pixels`, 'uint8', [m.height, m.width, 3]);
      artifacts[name] = { ...m, pixels: t.bytes.slice() };
    } else {
      const t = expectTensor(p.tensors[`${name}.data`], `${name}.data`, 'float32', m.shape);
      artifacts[name] = { kind: 'latents', shape: m.shape, data: float32Elements(t, `${name}.data`).slice() };
    }
  }
  return artifacts;
}

const DecodedChunkMetaSchema = z.strictObject({
  node: z.string().min(1).max(64),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive(),
  fps: z.number().positive(),
  firstFrame: z.number().int().nonnegative(),
  totalFrames: z.number().int().positive(),
});

/**
 * Decode → front, ahead of the outputs: a progressively decoded piece of the video (a `chunk` event with `decoded`),
 * frames as tensor `frames` uint8 RGB24 `[numFrames, H, W, 3]`, its node and place in the video in metadata.
 */
export function packDecodedChunk(job: AdmittedRequest, ev: { node: string; artifact: VideoArtifact; decoded: DecodedChunkInfo }): DiffusionStagePayload {
  const a = ev.artifact;
  return jobPayload(
    job,
    'decode',
    'decode',
    RUNTIME_PAYLOAD.decodedChunk,
    { frames: { dtype: 'uint8', shape: [a.numFrames, a.height, a.width, 3], bytes: a.frames } },
    { chunk: { node: ev.node, width: a.width, height: a.height, numFrames: a.numFrames, fps: a.fps, ...ev.decoded } },
  );
}

/**
 * The `chunk` event a decoded-chunk payload carries (frames copied, so the payload's buffer may be dropped).
 * @throws PayloadError for malformed `metadata.chunk`, a chunk past the video's end, or frames that do not match it.
 */
export function unpackDecodedChunk(p: DiffusionStagePayload): { node: string; artifact: VideoArtifact; decoded: DecodedChunkInfo } {
  const r = DecodedChunkMetaSchema.safeParse(p.metadata.chunk);
  if (!r.success) throw new PayloadError(`${RUNTIME_PAYLOAD.decodedChunk}: metadata.chunk: ${r.error.issues[0].message}`, { param: 'metadata.chunk' });
  const m = r.data;
  if (m.firstFrame + m.numFrames > m.totalFrames)
    throw new PayloadError(`${RUNTIME_PAYLOAD.decodedChunk}: frames ${m.firstFrame}..${m.firstFrame + m.numFrames - 1} lie past the video's ${m.totalFrames}`, {
      param: 'metadata.chunk',
    });
  const t = expectTensor(p.tensors.frames, 'frames', 'uint8', [m.numFrames, m.height, m.width, 3]);
  return {
    node: m.node,
    artifact: { kind: 'video', width: m.width, height: m.height, numFrames: m.numFrames, fps: m.fps, frames: t.bytes.slice() },
    decoded: { firstFrame: m.firstFrame, totalFrames: m.totalFrames },
  };
}
