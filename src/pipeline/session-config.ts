import { z } from 'zod';

/** Rollout shape and limits of interactive world sessions (`Engine.session`). */
export const SessionConfigSchema = z
  .strictObject({
    /** Latent frames per chunk (one chunk = one rollout step of the session). Default 1. */
    chunkFrames: z.number().int().min(1).max(16).default(1),
    /** Latent frames pinned as the attention sink. Default 1 (the first frame). */
    sinkFrames: z.number().int().min(0).max(64).default(1),
    /** Most recent committed frames kept attendable (local window). Default 6. */
    localWindowFrames: z.number().int().min(0).max(256).default(6),
    /** Denoise steps per chunk (few-step schedule). Default 2. */
    steps: z.number().int().min(1).max(50).default(2),
    /**
     * Denoise steps of a session's first chunk, which has no committed frames to condition on (the prompt alone
     * decides it, as a T2V frame). Default 16: with 2 the first frame is a blurred mean that the rollout carries on.
     */
    firstChunkSteps: z.number().int().min(1).max(50).default(16),
    /** Sessions open at once; opening one more fails with OMNIRX_ERR_QUEUE_FULL. Default 4. */
    maxSessions: z.number().int().min(1).max(1024).default(4),
    /** A session with no action, credit, flush or emitted frame for this long is closed and freed (ms). Default 60 000. */
    idleTimeoutMs: z
      .number()
      .int()
      .min(1)
      .max(24 * 3600 * 1000)
      .default(60_000),
  })
  .refine((s) => s.sinkFrames % s.chunkFrames === 0 && s.localWindowFrames % s.chunkFrames === 0, {
    message: 'sinkFrames and localWindowFrames must be multiples of chunkFrames (the KV cache recycles whole chunks)',
    path: ['localWindowFrames'],
  });
export type SessionConfig = z.infer<typeof SessionConfigSchema>;
