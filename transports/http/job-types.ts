/** Lifecycle of a video job as the OpenAI API names it. */
export type JobStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

/** The values a job actually runs with, echoed in the job object (null until the engine admits the job). */
export interface UsedParams {
  width: number | null;
  height: number | null;
  num_frames: number | null;
  fps: number | null;
  num_inference_steps: number | null;
  guidance_scale: number | null;
  /** [start, end) fractions of the denoise steps that ran guidance. */
  guidance_interval: [number, number] | null;
  flow_shift: number | null;
  sampler: string | null;
  /** Share of fresh noise in each Euler step's re-noising (0: deterministic). */
  eta: number | null;
  seed: number | null;
}
