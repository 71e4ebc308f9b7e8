import { createTensor } from '../../native/binding';
import type { FamilyStages, PhaseHandoff } from '../../pipeline/family/family';
import type { PipelinePolicies } from '../../pipeline/policies/policies';
import {
  expectTensor,
  float32Elements,
  float32Tensor,
  PayloadError,
  type DiffusionStagePayload,
  type PayloadTensor,
  type StageRole,
} from '../../pipeline/stage-payload';
import { latentShape, type WanT2VContext } from './context';
import type { WanComponent, WanT2VModel } from './model';
import { WanSessionStage } from './session-stages';
import type { WanT2VState } from './state';

/** Payload types the Wan family hands between its phases. */
export const WAN_PAYLOAD = {
  /** Encode → Denoise: `prompt_embeds` (and `negative_embeds`), float32 `[1, Lt, dModel]`. */
  textEmbeds: 'wan.text_embeds',
  /** Denoise → Decode: `latents`, float32 `[1, C, F, h, w]`. */
  latents: 'wan.latents',
} as const;

/**
 * Components each stage of a disaggregated Wan deployment constructs and loads (stage-specific construction):
 * encode — tokenizer, text encoder and VAE encoder (image conditioning); denoise — the DiT(s) the expert routing
 * selects from (action modules live inside the DiT); decode — the VAE decoder. The Denoise stage never loads an
 * encoder or the VAE.
 */
function wanStageComponents(role: StageRole, policies: PipelinePolicies): Set<WanComponent> {
  switch (role) {
    case 'encode':
      return new Set(['tokenizer', 'text_encoder', 'vae_encoder']);
    case 'denoise':
      return new Set(policies.expert.components as WanComponent[]);
    case 'decode':
      return new Set(['vae']);
  }
}

/** Restores float32 `name` of shape `shape` into a native tensor owned by `state`. */
function restoreTensor(ctx: WanT2VContext, p: DiffusionStagePayload, state: WanT2VState, name: string, shape: readonly number[]) {
  return state.own(createTensor(ctx.native, shape, float32Elements(expectTensor(p.tensors[name], name, 'float32', shape), name)));
}

/**
 * The Wan T2V/T2I graph split into its three phases (docs/design.md §9, docs/disaggregation.md). A phase is a set of
 * the graph's own nodes — the very `NodeSpec`s the in-process executor runs — so both topologies execute the same
 * stage and loop objects and disaggregation changes where computation runs, never the numbers:
 *
 * - encode: `text_encoder` (prompt → text embeds `[1, Lt, dModel]`)
 * - denoise: `denoise` (text embeds → latents `[1, C, F, h, w]`, one step per StepScheduler grant)
 * - decode: `decode_video` | `decode_image`, and `export_latents` when asked (latents → RGB24 frames, latents artifact)
 *
 * Handed tensors are copies out of native memory: a payload outlives the state it was packed from (an in-process
 * hand-off passes the payload itself to the next stage).
 */
export const wanStages: FamilyStages<WanT2VModel, WanT2VState> = {
  components: wanStageComponents,
  encoderComponents: ['tokenizer', 'text_encoder', 'vae_encoder'],
  phases: Object.freeze({
    encode: { nodes: ['text_encoder'], consumes: ['prompt'] },
    denoise: { nodes: ['denoise'], consumes: ['text_embeds'] },
    decode: { nodes: ['decode_video', 'decode_image', 'export_latents'], consumes: ['latents'] },
  }),

  pack(role, _ctx, state): PhaseHandoff {
    if (role === 'encode') {
      if (state.promptEmbeds === undefined) throw new PayloadError(`${WAN_PAYLOAD.textEmbeds}: the text_encoder output is missing`);
      const tensors: Record<string, PayloadTensor> = { prompt_embeds: float32Tensor(state.promptEmbeds.data.slice(), state.promptEmbeds.shape) };
      if (state.negativeEmbeds !== undefined) tensors.negative_embeds = float32Tensor(state.negativeEmbeds.data.slice(), state.negativeEmbeds.shape);
      return { payloadType: WAN_PAYLOAD.textEmbeds, tensors };
    }
    if (state.latents === undefined) throw new PayloadError(`${WAN_PAYLOAD.latents}: the denoise output is missing`);
    return { payloadType: WAN_PAYLOAD.latents, tensors: { latents: float32Tensor(state.latents.data.slice(), state.latents.shape) } };
  },

  restore(role, ctx, p, state) {
    const want = role === 'denoise' ? WAN_PAYLOAD.textEmbeds : WAN_PAYLOAD.latents;
    if (p.payloadType !== want) throw new PayloadError(`the ${role} stage expects a ${want} payload, got ${p.payloadType}`, { param: 'payloadType' });
    if (role === 'denoise') {
      const te = ctx.model.spec.textEncoder;
      const shape = [1, te.maxLength, te.dModel];
      state.promptEmbeds = restoreTensor(ctx, p, state, 'prompt_embeds', shape);
      if (p.tensors.negative_embeds !== undefined) state.negativeEmbeds = restoreTensor(ctx, p, state, 'negative_embeds', shape);
    } else {
      state.latents = restoreTensor(ctx, p, state, 'latents', [1, ...latentShape(ctx)]);
    }
  },

  sessions: (env) => new WanSessionStage(env),
};
