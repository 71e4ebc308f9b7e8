import { loopNode, type PipelineNode } from '../stage';
import type { WanT2VContext } from './context';
import { denoiseLoop } from './denoise-loop';
import type { WanT2VState } from './state';
import { textEncodeStage } from './text-encode';
import { vaeDecodeStage } from './vae-decode';

/** The Wan T2V / T2I pipeline: text_encoder → denoise (loop) → vae_decoder. */
export const wanT2VPipeline: ReadonlyArray<PipelineNode<WanT2VContext, WanT2VState>> = Object.freeze([
  { kind: 'stage', stage: textEncodeStage },
  loopNode(denoiseLoop),
  { kind: 'stage', stage: vaeDecodeStage },
]);
