import { z } from 'zod';
import { EtaSchema } from './eta';
import { GuidanceIntervalSchema } from './guidance-interval';
import { DEFAULT_LIMITS, type RequestLimits } from './limits';

/** Declared task; never inferred from the inputs (docs/design.md §2). */
export const TaskSchema = z.enum(['T2V', 'T2I']);
export type Task = z.infer<typeof TaskSchema>;

/** Output modalities a request may ask for. */
export const OutputModalitySchema = z.enum(['video', 'image', 'latents']);
export type OutputModality = z.infer<typeof OutputModalitySchema>;

/**
 * Builds the `OmniRequest` schema for a set of resource ceilings. The schema is the single source of truth for
 * the request type: `OmniRequest` (output, defaults applied) and `OmniRequestInput` (what a caller writes) are
 * inferred from it.
 *
 * Units: `width`/`height` in pixels, `fps` in frames per second, `numFrames` in video frames. Model-specific
 * constraints (e.g. width a multiple of the VAE × patch stride) and the combined ceilings (pixels, work) are
 * checked at admission, after the model's defaults are applied (`resolveDiffusionParams`), with the same error
 * shape.
 */
export function createOmniRequestSchema(limits: RequestLimits = DEFAULT_LIMITS) {
  const side = z.number().int().min(8).max(limits.maxSide);
  const prompt = z.string().max(limits.maxPromptChars);
  return z
    .strictObject({
      /** Caller-chosen id; the engine makes one when absent. */
      requestId: z.string().min(1).max(128).optional(),
      /** Registered model id; the engine's default model when absent. */
      model: z.string().min(1).max(128).optional(),
      task: TaskSchema,
      inputs: z.strictObject({
        prompt: prompt,
        negativePrompt: prompt.default(''),
      }),
      diffusion: z
        .strictObject({
          width: side.optional(),
          height: side.optional(),
          /** Video frames to generate; must be 1 for T2I. */
          numFrames: z.number().int().min(1).max(limits.maxFrames).optional(),
          /** Playback rate of the produced video, frames per second. */
          fps: z.number().int().min(1).max(120).optional(),
          numInferenceSteps: z.number().int().min(1).max(limits.maxSteps).optional(),
          /** Classifier-free guidance scale; 1 disables the unconditional forward. */
          guidanceScale: z.number().min(0).max(50).optional(),
          /**
           * Fractions [start, end) of the denoise steps that run guidance: step i of N is guided when start ≤ i/N < end
           * (Kynkäänniemi et al. 2024). The model's default, else every step, when absent.
           */
          guidanceInterval: GuidanceIntervalSchema.optional(),
          /** Flow shift applied to the sigma schedule (sigma' = s·sigma / (1 + (s − 1)·sigma)). */
          flowShift: z.number().min(0.01).max(100).optional(),
          /** Sampler of the denoise loop (flow-matching Euler, UniPC order 2, DMD few-step); the deployment's default when absent. */
          sampler: z.enum(['euler', 'unipc', 'dmd']).optional(),
          /**
           * Share of fresh noise in each Euler step's re-noising, in [0, 1] (`stochasticEulerStep`): 0 is the
           * deterministic Euler step, 1 re-noises the predicted clean latents with fresh noise alone. The model's
           * default, else 0, when absent; Euler only.
           */
          eta: EtaSchema.optional(),
          /** Seed of the initial noise, an unsigned 32-bit integer; random when absent (echoed in `final`). */
          seed: z.number().int().min(0).max(0xffffffff).optional(),
        })
        .default({}),
      outputs: z
        .strictObject({
          modalities: z.array(OutputModalitySchema).min(1).max(3).optional(),
          /** Also return the final latents `[C, F, H/8·…]` as an artifact. */
          returnLatents: z.boolean().default(false),
          /**
           * Every this many denoise steps, emit a preview as a `chunk` event: the first frame of the clean video the
           * step predicts (flow matching: x̂₀ = x_t − σ·v), decoded by the VAE, as an `image` artifact. Absent: none.
           */
          previewEvery: z.number().int().min(1).max(limits.maxSteps).optional(),
          /**
           * T2V: decode the final latents this many frames at a time with the causal VAE's streaming state (the same
           * pixels as one decode of the whole clip) and emit each group as a `chunk` event (a `video` artifact with
           * `decoded` info) as soon as it is decoded, so a stream can send its first frames before the clip is done.
           * The `final` video is unchanged. Absent or 0: one decode of the whole clip, no chunk events.
           */
          decodeChunkFrames: z.number().int().min(0).max(limits.maxFrames).optional(),
        })
        .default({ returnLatents: false }),
      /** Per-node overrides, validated against the pipeline's node parameter schemas at admission. */
      nodeParams: z.record(z.string().min(1).max(64), z.unknown()).optional(),
      /** Larger runs first when several requests are ready (used by the step scheduler). */
      priority: z.number().int().min(-100).max(100).default(0),
    })
    .superRefine((req, ctx) => {
      const d = req.diffusion;
      if (req.task === 'T2I' && d.numFrames !== undefined && d.numFrames !== 1) {
        ctx.addIssue({
          code: 'custom',
          path: ['diffusion', 'numFrames'],
          message: 'T2I generates one frame: numFrames must be 1',
          params: { ceiling: 'frames' },
        });
      }
    });
}

/** The request schema with the default ceilings. */
export const OmniRequestSchema = createOmniRequestSchema();
/** A validated request (defaults applied). */
export type OmniRequest = z.infer<typeof OmniRequestSchema>;
/** What a caller passes to `Engine.generate` (before defaults). */
export type OmniRequestInput = z.input<typeof OmniRequestSchema>;
