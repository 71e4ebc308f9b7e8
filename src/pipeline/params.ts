import type { GuidanceInterval } from '../request/guidance-interval';
import type { Task, OutputModality } from '../request/omni-request';
import type { SamplerName } from './policies/sampler-policy';

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
  /** Larger runs first at step boundaries. */
  priority: number;
}
