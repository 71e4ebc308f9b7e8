/**
 * The Wan family (docs/design.md §7): Wan-2.1-style text-to-video and text-to-image with a T5-style text encoder and a
 * causal conv VAE, world sessions on its block-causal variant, and Encode / Denoise / Decode stage phases. Registered
 * under `model.json`'s `family: "wan-t2v"`; `omnirx/families/wan` is also the module a stage process loads it from.
 */
import { defineFamily } from '../../pipeline/family/family';
import { estimateMemory, resolveWanParams, wanRequestWork } from './admission';
import { WanT2VModel } from './model';
import { parseWanSpec, WAN_FAMILY } from './model-spec';
import { wanStages } from './phases';
import { wanT2VPipelineSpec } from './pipeline';
import { wanSessions } from './session';
import { WanT2VState } from './state';

/** The Wan family's registration. */
export const family = defineFamily({
  name: WAN_FAMILY,
  module: 'omnirx/families/wan',
  tasks: ['T2V', 'T2I'],
  parseSpec: parseWanSpec,
  load: (native, dir, spec, components, options) => WanT2VModel.load(native, dir, spec, components, options),
  pipeline: wanT2VPipelineSpec,
  createState: () => new WanT2VState(),
  resolve: resolveWanParams,
  claim: estimateMemory,
  work: wanRequestWork,
  sessions: wanSessions,
  stages: wanStages,
});

export { WanT2VModel } from './model';
export { ModelSpecSchema as WanModelSpecSchema, parseWanSpec, WAN_FAMILY, type ModelSpec as WanModelSpec } from './model-spec';
export { defaultModelSpec, DEFAULT_TOKENIZER } from './default-spec';
export { writeSeededModel } from './seeded-model';
