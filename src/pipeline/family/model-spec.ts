import { z } from 'zod';
import { EtaSchema } from '../../request/eta';
import { GuidanceIntervalSchema } from '../../request/guidance-interval';

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

/** A model id: the name of its directory in the models folder. */
export const ModelIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9._-]+$/);

/**
 * What every `model.json` holds, whatever its family (docs/design.md §7): the id, the `family` that builds it (the
 * key of the family registry), a description, how its weights were made and the request defaults. A family's own
 * schema extends this with its components' architectures; the runtime above the families reads only these fields.
 */
export const ModelSpecBaseSchema = z.object({
  id: ModelIdSchema,
  family: z.string().min(1).max(64),
  description: z.string().max(2000),
  /** How the weights were made: 'seeded' (deterministic random, for tests and plumbing) or 'trained'. */
  weights: z.enum(['seeded', 'trained']),
  defaults: DiffusionDefaultsSchema,
});
export type ModelSpecBase = z.infer<typeof ModelSpecBaseSchema>;
