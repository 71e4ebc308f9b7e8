import type { FeatureCache } from '../../cache/feature-cache';
import type { NativeBinding } from '../../native/binding';
import type { WanT2VModel } from './model';
import type { ResolvedParams } from '../../pipeline/params';
import type { StageContext } from '../../pipeline/stage';

/** Context of the Wan T2V pipeline's stages. `signal` aborts when the request is cancelled. */
export interface WanT2VContext extends StageContext<WanT2VModel, ResolvedParams> {
  readonly native: NativeBinding;
  readonly signal: AbortSignal;
  /** Validated `nodeParams`, keyed by node name. */
  readonly nodeParams: Readonly<Record<string, unknown>>;
  /** The engine's feature cache (text embeddings); absent: every request runs its encoders. */
  readonly featureCache?: FeatureCache;
}

/** Latent grid `[C, F, h, w]` for the resolved parameters. */
export function latentShape(ctx: WanT2VContext): [number, number, number, number] {
  const spec = ctx.model.spec;
  const s = 2 ** (spec.vae.channels.length - 1);
  return [spec.vae.zDim, ctx.params.numFrames, ctx.params.height / s, ctx.params.width / s];
}
