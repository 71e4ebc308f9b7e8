import { z } from 'zod';
import { ArtifactSchema } from './artifacts';

const base = { requestId: z.string() };

/** The request passed validation and waits for admission. */
export const QueuedEventSchema = z.strictObject({ type: z.literal('queued'), ...base, position: z.number().int().nonnegative() });

/** The request was admitted; `estimate` is the cost model's prediction. */
export const AdmittedEventSchema = z.strictObject({
  type: z.literal('admitted'),
  ...base,
  model: z.string(),
  /** Values actually used, after the model's defaults were applied. */
  params: z.record(z.string(), z.union([z.number(), z.string(), z.boolean()])),
  /** Cost-model prediction: steps, DiT forwards, and predicted denoise time in ms (refined online). */
  estimate: z.strictObject({ steps: z.number().int().nonnegative(), forwards: z.number().int().nonnegative(), ms: z.number().nonnegative().optional() }),
});

export const NodeStartEventSchema = z.strictObject({ type: z.literal('node_start'), ...base, node: z.string() });
/** A graph node finished; `ms` is its wall time in milliseconds. */
export const NodeEndEventSchema = z.strictObject({ type: z.literal('node_end'), ...base, node: z.string(), ms: z.number().nonnegative() });

/** One loop step finished: `index` is 0-based, `sigma` the noise level the step started from, `ms` its wall time. */
export const StepEventSchema = z.strictObject({
  type: z.literal('step'),
  ...base,
  node: z.string(),
  index: z.number().int().nonnegative(),
  total: z.number().int().positive(),
  timestep: z.number(),
  sigma: z.number(),
  ms: z.number().nonnegative(),
});

/** Where a world session's chunk sits in the stream, and the action it was generated with. */
export const RolloutInfoSchema = z.strictObject({
  /** Chunk index in the session (0, 1, …). */
  chunk: z.number().int().nonnegative(),
  /** Index of the chunk's first frame in the session. */
  firstFrame: z.number().int().nonnegative(),
  /** Presentation time of the chunk's first frame, ms from the session start (firstFrame / fps · 1000). */
  ptsMs: z.number().nonnegative(),
  /** The action sampled at the chunk's start (with the caller's id, when it gave one). */
  action: z.strictObject({ key: z.string(), vector: z.tuple([z.number(), z.number()]).optional(), id: z.string().optional() }),
});

/**
 * Where a generation's decoded chunk sits in its video (`outputs.decodeChunkFrames`): the chunk's `video` artifact
 * holds frames [firstFrame, firstFrame + artifact.numFrames) of the `totalFrames` the `final` video will hold.
 */
export const DecodedChunkInfoSchema = z.strictObject({
  /** Index of the chunk's first frame in the video (0, then increasing; the chunks are contiguous). */
  firstFrame: z.number().int().nonnegative(),
  /** Frames of the whole video (the `final` artifact's numFrames). */
  totalFrames: z.number().int().positive(),
});

/**
 * A streamed piece of output. A denoise preview is an `image` artifact with neither `rollout` nor `decoded`;
 * `rollout` is set for world-session chunks; `decoded` for the frames of a generation decoded ahead of its `final`.
 */
export const ChunkEventSchema = z.strictObject({
  type: z.literal('chunk'),
  ...base,
  node: z.string(),
  artifact: ArtifactSchema,
  rollout: RolloutInfoSchema.optional(),
  decoded: DecodedChunkInfoSchema.optional(),
});
/** A named output finished before the request did. */
export const ArtifactEventSchema = z.strictObject({ type: z.literal('artifact'), ...base, name: z.string(), artifact: ArtifactSchema });

export const OmniOutputSchema = z.strictObject({
  requestId: z.string(),
  artifacts: z.record(z.string(), ArtifactSchema),
  /** Seed actually used for the initial noise. */
  seed: z.number().int().nonnegative(),
  /** Wall time of the whole request, milliseconds. */
  ms: z.number().nonnegative(),
});

export const FinalEventSchema = z.strictObject({ type: z.literal('final'), ...base, output: OmniOutputSchema });

/** Where in the request a validation failure points (dotted path), and why. */
export const ErrorIssueSchema = z.strictObject({ path: z.string(), code: z.string(), message: z.string() });

/** The request failed. `node` names the graph node that failed (absent for validation and admission errors). */
export const ErrorEventSchema = z.strictObject({
  type: z.literal('error'),
  ...base,
  code: z.string(),
  message: z.string(),
  node: z.string().optional(),
  /** The first offending field as a dotted path (`diffusion.width`), for validation errors. */
  param: z.string().optional(),
  issues: z.array(ErrorIssueSchema).optional(),
  /** Artifacts completed before the failure. */
  partial: z.record(z.string(), ArtifactSchema).optional(),
  completedSteps: z.number().int().nonnegative().optional(),
});

/** The subscriber's cancel took effect; emitted only to observers that are still listening (e.g. transports). */
export const CancelledEventSchema = z.strictObject({ type: z.literal('cancelled'), ...base, completedSteps: z.number().int().nonnegative() });

/** Everything a request's stream can carry, discriminated by `type` (docs/design.md §2). */
export const OmniEventSchema = z.discriminatedUnion('type', [
  QueuedEventSchema,
  AdmittedEventSchema,
  NodeStartEventSchema,
  NodeEndEventSchema,
  StepEventSchema,
  ChunkEventSchema,
  ArtifactEventSchema,
  FinalEventSchema,
  ErrorEventSchema,
  CancelledEventSchema,
]);

export type OmniEvent = z.infer<typeof OmniEventSchema>;
export type OmniOutput = z.infer<typeof OmniOutputSchema>;
export type StepEvent = z.infer<typeof StepEventSchema>;
export type ChunkEvent = z.infer<typeof ChunkEventSchema>;
export type RolloutInfo = z.infer<typeof RolloutInfoSchema>;
export type DecodedChunkInfo = z.infer<typeof DecodedChunkInfoSchema>;
export type ErrorEvent = z.infer<typeof ErrorEventSchema>;
export type ErrorIssue = z.infer<typeof ErrorIssueSchema>;
