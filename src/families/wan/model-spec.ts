import { z } from 'zod';
import { OmniError } from '../../errors';
import { DiffusionDefaultsSchema, ModelIdSchema } from '../../pipeline/family/model-spec';
import { T5ConfigSchema } from '../../models/t5/config';
import { VaeConfigSchema } from '../../models/vae/config';
import { WanDiTConfigSchema } from '../../models/wan/config';

/** The `family` of Wan model directories. */
export const WAN_FAMILY = 'wan-t2v';

/**
 * `model.json` of a model directory: which family builds it, each component's architecture, and the defaults.
 * Files beside it: `tokenizer.json`, `text_encoder.safetensors`, `transformer.safetensors`, `vae.safetensors`.
 */
export const ModelSpecSchema = z.strictObject({
  id: ModelIdSchema,
  family: z.literal(WAN_FAMILY),
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

/**
 * Validates a Wan `model.json` object, the cross-component constraints included (the DiT's text width is the text
 * encoder's, its in/out channels the VAE's latent channels).
 * @param file how messages name the file (a `ModelFile` label: no server path)
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming `file` and the field as a dotted path.
 */
export function parseWanSpec(json: unknown, file: string): ModelSpec {
  const parsed = ModelSpecSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const spec = parsed.data;
  if (spec.transformer.textDim !== spec.textEncoder.dModel) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: transformer.textDim ${spec.transformer.textDim} ≠ textEncoder.dModel ${spec.textEncoder.dModel}`);
  }
  if (spec.transformer.inChannels !== spec.vae.zDim || spec.transformer.outChannels !== spec.vae.zDim) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: transformer in/out channels must equal vae.zDim ${spec.vae.zDim}`);
  }
  return spec;
}

/** Pixels per latent cell (the VAE's spatial scale). */
export function vaeScale(spec: ModelSpec): number {
  return 2 ** (spec.vae.channels.length - 1);
}

/** Pixels per latent cell times the DiT's spatial patch: width and height must be multiples of it. */
export function pixelStride(spec: ModelSpec): number {
  const [, ph, pw] = spec.transformer.patchSize;
  return vaeScale(spec) * Math.max(ph, pw);
}

/** Tokens of the DiT's attention at a size and frame count: ⌈F / pt⌉ · (H / s / ph) · (W / s / pw). */
export function latentTokens(spec: ModelSpec, p: { numFrames: number; width: number; height: number }): number {
  const [pt, ph, pw] = spec.transformer.patchSize;
  const s = vaeScale(spec);
  return Math.ceil(p.numFrames / pt) * (p.height / s / ph) * (p.width / s / pw);
}
