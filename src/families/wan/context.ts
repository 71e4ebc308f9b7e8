import type { RequestContext } from '../../pipeline/family/family';
import type { WanT2VModel } from './model';
import { vaeScale } from './model-spec';

/** Context of the Wan T2V pipeline's stages: the runtime's request context over a Wan model. */
export type WanT2VContext = RequestContext<WanT2VModel>;

/** Latent grid `[C, F, h, w]` for the resolved parameters. */
export function latentShape(ctx: Pick<WanT2VContext, 'model' | 'params'>): [number, number, number, number] {
  const spec = ctx.model.spec;
  const s = vaeScale(spec);
  return [spec.vae.zDim, ctx.params.numFrames, ctx.params.height / s, ctx.params.width / s];
}
