import { z } from 'zod';
import { EtaSchema } from '../../request/eta';
import { GuidanceIntervalSchema } from '../../request/guidance-interval';
import { T5ConfigSchema } from '../../models/t5/config';
import { VaeConfigSchema } from '../../models/vae/config';
import { WanDiTConfigSchema } from '../../models/wan/config';

/** Values a model uses when a request leaves them out; echoed in the `admitted` event. */
export const DiffusionDefaultsSchema = z.strictObject({
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive(),
  fps: z.number().int().positive(),
  numInferenceSteps: z.number().int().positive(),
  guidanceScale: z.number().nonnegative(),
  /** Fractions [start, end) of the denoise steps that run guidance when a request names none; absent: the deployment's (every step by default). */
  guidanceInterval: GuidanceIntervalSchema.optional(),
  flowShift: z.number().positive(),
  /** Share of fresh noise in each Euler step's re-noising, [0, 1], when a T2V/T2I request names none; absent: 0 (deterministic). Euler only. */
  eta: EtaSchema.optional(),
  /** Defaults of the model's world sessions (Engine.session): `eta` re-noises every chunk's Euler steps; absent: 0. */
  world: z.strictObject({ eta: EtaSchema.optional() }).optional(),
});
export type DiffusionDefaults = z.infer<typeof DiffusionDefaultsSchema>;

/**
 * `model.json` of a model directory: which family builds it, each component's architecture, and the defaults.
 * Files beside it: `tokenizer.json`, `text_encoder.safetensors`, `transformer.safetensors`, `vae.safetensors`.
 */
export const ModelSpecSchema = z.strictObject({
  id: z.string().min(1).max(128).regex(/^[A-Za-z0-9._-]+$/),
  family: z.literal('wan-t2v'),
  description: z.string().max(2000),
  /** How the weights were made: 'seeded' (deterministic random, for tests and plumbing) or 'trained'. */
  weights: z.enum(['seeded', 'trained']),
  textEncoder: T5ConfigSchema,
  transformer: WanDiTConfigSchema,
  /** Optional second (low-noise) expert for boundary expert routing; its weights are `transformer_2.safetensors`. */
  transformer_2: WanDiTConfigSchema.optional(),
  vae: VaeConfigSchema,
  defaults: DiffusionDefaultsSchema,
});
export type ModelSpec = z.infer<typeof ModelSpecSchema>;
