import type { FamilyStages, PhaseHandoff } from 'omnirx/families';
import { expectTensor, float32Elements, float32Tensor, PayloadError, type DiffusionStagePayload, type PayloadTensor } from 'omnirx/pipeline';
import type { ToyComponent } from './spec';
import type { ToyImageModel } from './model';
import type { ToyState } from './pipeline';

/** Payload types the toy-image family hands between its phases. */
export const TOY_PAYLOAD = {
  /** Encode → Denoise: `text` (and `negative`), float32 `[dim]`. */
  embedding: 'toy-image.embedding',
  /** Denoise → Decode: `rgb`, the denoised image, float32 `[3, H, W]`. */
  rgb: 'toy-image.rgb',
} as const;

const ROLE_COMPONENTS: Readonly<Record<'encode' | 'denoise' | 'decode', ReadonlySet<ToyComponent>>> = {
  encode: new Set(['embedder']),
  denoise: new Set(['denoiser']),
  decode: new Set(['decoder']),
};

/** A copy of float32 payload tensor `name` of `shape` (the payload's buffer may be dropped after). */
function restored(p: DiffusionStagePayload, name: string, shape: readonly number[]): Float32Array {
  return float32Elements(expectTensor(p.tensors[name], name, 'float32', shape), name).slice();
}

/**
 * The toy-image graph on Encode / Denoise / Decode stages: `embed_text` on Encode (the embedder's table only),
 * `denoise` on Denoise (the denoiser only), `render` on Decode (the colour decoder only). Hand-offs are copies of the
 * state's arrays.
 */
export const toyStages: FamilyStages<ToyImageModel, ToyState> = {
  components: (role) => ROLE_COMPONENTS[role],
  encoderComponents: ['embedder'],
  phases: Object.freeze({
    encode: { nodes: ['embed_text'], consumes: ['prompt'] },
    denoise: { nodes: ['denoise'], consumes: ['embedding'] },
    decode: { nodes: ['render'], consumes: ['rgb'] },
  }),

  pack(role, ctx, state): PhaseHandoff {
    if (role === 'encode') {
      if (state.text === undefined) throw new PayloadError(`${TOY_PAYLOAD.embedding}: the embed_text output is missing`);
      const tensors: Record<string, PayloadTensor> = { text: float32Tensor(state.text.slice(), [state.text.length]) };
      if (state.negative !== undefined) tensors.negative = float32Tensor(state.negative.slice(), [state.negative.length]);
      return { payloadType: TOY_PAYLOAD.embedding, tensors };
    }
    if (state.image === undefined) throw new PayloadError(`${TOY_PAYLOAD.rgb}: the denoise output is missing`);
    return { payloadType: TOY_PAYLOAD.rgb, tensors: { rgb: float32Tensor(state.image.slice(), [3, ctx.params.height, ctx.params.width]) } };
  },

  restore(role, ctx, p, state) {
    const want = role === 'denoise' ? TOY_PAYLOAD.embedding : TOY_PAYLOAD.rgb;
    if (p.payloadType !== want)
      throw new PayloadError(`the ${role} stage of ${ctx.model.spec.family} expects a ${want} payload, got ${p.payloadType}`, { param: 'payloadType' });
    if (role === 'denoise') {
      const dim = ctx.model.spec.embedder.dim;
      state.text = restored(p, 'text', [dim]);
      if (p.tensors.negative !== undefined) state.negative = restored(p, 'negative', [dim]);
    } else {
      state.image = restored(p, 'rgb', [3, ctx.params.height, ctx.params.width]);
    }
  },
};
