import { z } from 'zod';
import { EtaSchema } from '../request/eta';
import { GuidanceIntervalSchema, type GuidanceInterval } from '../request/guidance-interval';
import { OutputModalitySchema, TaskSchema, type OutputModality, type Task } from '../request/omni-request';
import { SAMPLER_NAMES, type SamplerName } from './policies/sampler-policy';

/** Request parameters after the model's defaults were applied and the model's constraints were checked. */
export interface ResolvedParams {
  task: Task;
  model: string;
  prompt: string;
  negativePrompt: string;
  /** Pixels. */
  width: number;
  height: number;
  numFrames: number;
  /** Frames per second of the output video. */
  fps: number;
  numInferenceSteps: number;
  guidanceScale: number;
  /** Fractions [start, end) of the denoise steps that run classifier-free guidance (the request's, else the model's default, else the deployment's). */
  guidanceInterval: GuidanceInterval;
  flowShift: number;
  sampler: SamplerName;
  /** Share of fresh noise in each Euler step's re-noising, [0, 1] (0: deterministic; always 0 for the other samplers). */
  eta: number;
  /** Unsigned 32-bit seed of the initial noise. */
  seed: number;
  modalities: OutputModality[];
  returnLatents: boolean;
  /** Denoise steps between previews (`outputs.previewEvery`); absent: no previews. */
  previewEvery?: number;
  /** T2V: frames per decoded chunk event (`outputs.decodeChunkFrames`, ≥ 1); absent: one decode, no chunk events. */
  decodeChunkFrames?: number;
  /** Larger runs first at step boundaries. */
  priority: number;
}

/** Resolved request parameters as they travel in payload metadata (validated again on arrival). */
export const ResolvedParamsSchema = z.strictObject({
  task: TaskSchema,
  model: z.string().min(1).max(128),
  prompt: z.string().max(100_000),
  negativePrompt: z.string().max(100_000),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive(),
  fps: z.number().positive(),
  numInferenceSteps: z.number().int().positive(),
  guidanceScale: z.number(),
  guidanceInterval: GuidanceIntervalSchema,
  flowShift: z.number(),
  sampler: z.enum(SAMPLER_NAMES),
  eta: EtaSchema,
  seed: z.number().int().nonnegative(),
  modalities: z.array(OutputModalitySchema),
  returnLatents: z.boolean(),
  previewEvery: z.number().int().positive().optional(),
  decodeChunkFrames: z.number().int().positive().optional(),
  priority: z.number(),
});
