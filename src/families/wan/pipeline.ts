import { z } from 'zod';
import type { PipelinePolicies } from '../../pipeline/policies/policies';
import type { NodeRun, PipelineSpec } from '../../pipeline/spec';
import type { LoopStage } from '../../pipeline/stage';
import type { WanT2VContext } from './context';
import { createDenoiseLoop } from './denoise-loop';
import type { WanT2VState } from './state';
import { createTextEncodeStage } from './text-encode';
import { decodeImageStage, decodeVideoStage, exportLatentsStage } from './vae-decode';

/** `nodeParams.denoise`: an explicit sigma schedule (strictly decreasing, ending at 0) replaces the sampler's; it runs with Euler. */
export const DenoiseNodeParamsSchema = z.strictObject({
  sigmas: z
    .array(z.number().min(0).max(1))
    .min(2)
    .max(201)
    .refine((s) => s[s.length - 1] === 0, { message: 'the last sigma must be 0' })
    .refine((s) => s.every((v, i) => i === 0 || v < s[i - 1]), { message: 'sigmas must be strictly decreasing' })
    .optional(),
});

function loop<L>(stage: LoopStage<WanT2VContext, WanT2VState, L>): NodeRun<WanT2VContext, WanT2VState> {
  return { kind: 'loop', stage: stage as unknown as LoopStage<WanT2VContext, WanT2VState, unknown> };
}

/**
 * The Wan T2V / T2I graph: text_encoder → denoise (loop) → decode_video (T2V) | decode_image (T2I), with
 * export_latents fanning out from the same latents when the request asks for them; the request's final event
 * fans the artifacts in.
 */
export function wanT2VPipelineSpec(policies: PipelinePolicies): PipelineSpec<WanT2VContext, WanT2VState> {
  const both = ['T2V', 'T2I'] as const;
  return {
    family: 'wan-t2v',
    components: {
      tokenizer: { tasks: both },
      text_encoder: { tasks: both },
      transformer: { tasks: both },
      transformer_2: { tasks: both },
      vae: { tasks: both },
    },
    requestInputs: { prompt: 'text' },
    nodes: [
      {
        name: 'text_encoder',
        run: { kind: 'stage', stage: createTextEncodeStage(policies.cfg) },
        inputs: { prompt: 'text' },
        outputs: { text_embeds: 'text_embeds' },
        components: ['tokenizer', 'text_encoder'],
        tasks: both,
      },
      {
        name: 'denoise',
        run: loop(createDenoiseLoop(policies)),
        inputs: { text_embeds: 'text_embeds' },
        outputs: { latents: 'latents' },
        components: policies.expert.components,
        tasks: both,
        params: DenoiseNodeParamsSchema,
        policies: [policies.cfg, policies.expert, policies.flowShift, policies.sampler],
      },
      {
        name: 'decode_video',
        run: { kind: 'stage', stage: decodeVideoStage },
        inputs: { latents: 'latents' },
        outputs: { video: 'video' },
        components: ['vae'],
        tasks: ['T2V'],
      },
      {
        name: 'decode_image',
        run: { kind: 'stage', stage: decodeImageStage },
        inputs: { latents: 'latents' },
        outputs: { image: 'image' },
        components: ['vae'],
        tasks: ['T2I'],
      },
      {
        name: 'export_latents',
        run: { kind: 'stage', stage: exportLatentsStage },
        inputs: { latents: 'latents' },
        outputs: { latents_artifact: 'latents_artifact' },
        components: [],
        tasks: both,
        when: (p) => p.returnLatents,
      },
    ],
  };
}
