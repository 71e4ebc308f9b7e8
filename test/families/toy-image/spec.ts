import { OmniError } from 'omnirx';
import { DiffusionDefaultsSchema, ModelSpecBaseSchema } from 'omnirx/families';
import { z } from 'zod';

/** The `family` of toy-image model directories. */
export const TOY_FAMILY = 'toy-image';

/** Sinusoidal features of the noise level the denoiser sees (sin and cos at 4 frequencies). */
export const TIME_FEATURES = 8;
/** Sinusoidal features of a patch's position (sin and cos of its column and of its row). */
export const POSITION_FEATURES = 4;

/**
 * `model.json` of a toy-image model: the fields every model has (`ModelSpecBaseSchema`), its own components, and
 * image-only defaults (`numFrames` is 1). Files beside it: `embedder.toyw`, `denoiser.toyw`, `decoder.toyw`.
 */
export const ToySpecSchema = z.strictObject({
  ...ModelSpecBaseSchema.shape,
  family: z.literal(TOY_FAMILY),
  /** Hashed bag-of-words text embedding: each word lands in one of `buckets` rows of a `[buckets, dim]` table. */
  embedder: z.strictObject({
    buckets: z.number().int().min(2).max(65536),
    dim: z.number().int().min(1).max(512),
  }),
  /** Pixel-space denoiser: a one-hidden-layer MLP over `patch × patch` RGB patches, conditioned on text, σ and position. */
  denoiser: z.strictObject({
    patch: z.number().int().min(1).max(16),
    hidden: z.number().int().min(1).max(512),
  }),
  defaults: DiffusionDefaultsSchema.extend({ numFrames: z.literal(1) }),
});
export type ToySpec = z.infer<typeof ToySpecSchema>;

/**
 * Validates a toy-image `model.json` object (`file` names it in errors); the default size must be a multiple of the
 * patch.
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file and the field as a dotted path.
 */
export function parseToySpec(json: unknown, file: string): ToySpec {
  const r = ToySpecSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]].join('.') : issue.path.join('.');
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${field || '(root)'}: ${issue.message}`);
  }
  const spec = r.data;
  for (const side of ['width', 'height'] as const) {
    if (spec.defaults[side] % spec.denoiser.patch !== 0) {
      throw new OmniError(
        'OMNIRX_ERR_MODEL_LOAD',
        `${file}: defaults.${side}: ${spec.defaults[side]} is not a multiple of denoiser.patch ${spec.denoiser.patch}`,
      );
    }
  }
  return spec;
}

/** Values of one RGB patch (3 · patch²). */
export function patchValues(spec: ToySpec): number {
  return 3 * spec.denoiser.patch ** 2;
}

/** The tensors each component's weights file holds, with their shapes. */
export function componentTensors(spec: ToySpec): Record<ToyComponent, Record<string, number[]>> {
  const { buckets, dim } = spec.embedder;
  const { hidden } = spec.denoiser;
  const P = patchValues(spec);
  return {
    embedder: { table: [buckets, dim] },
    denoiser: {
      w_in: [hidden, P],
      b_in: [hidden],
      w_text: [hidden, dim],
      w_time: [hidden, TIME_FEATURES],
      w_pos: [hidden, POSITION_FEATURES],
      w_out: [P, hidden],
      b_out: [P],
    },
    decoder: { color: [3, 3], bias: [3] },
  };
}

/** Components of a toy-image model, one weights file each (`<component>.toyw`). */
export const TOY_COMPONENTS = ['embedder', 'denoiser', 'decoder'] as const;
export type ToyComponent = (typeof TOY_COMPONENTS)[number];
