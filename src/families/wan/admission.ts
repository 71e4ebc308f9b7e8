import type { RequestWork, ResolveEnv } from '../../pipeline/family/family';
import type { ResolvedParams } from '../../pipeline/params';
import type { PipelinePolicies } from '../../pipeline/policies/policies';
import { resolveDiffusionParams } from '../../pipeline/resolve';
import type { OmniRequest } from '../../request/omni-request';
import { denoiseWork } from './denoise-work';
import { latentTokens, pixelStride, vaeScale, type ModelSpec } from './model-spec';

/**
 * A Wan request's parameters (`resolveDiffusionParams` with the model's geometry: width and height multiples of VAE
 * scale × DiT patch, latent tokens ⌈F / pt⌉ · (H / s / ph) · (W / s / pw)).
 * @throws OmniError as `resolveDiffusionParams` does.
 */
export function resolveWanParams(req: OmniRequest, spec: ModelSpec, env: ResolveEnv): ResolvedParams {
  return resolveDiffusionParams(req, spec, env, {
    pixelStride: pixelStride(spec),
    strideOrigin: 'VAE scale × DiT patch',
    latentTokens: (p) => latentTokens(spec, p),
  });
}

/**
 * Memory a request needs, from its shapes (float32 everywhere):
 * - resident: the latents and the two guidance predictions `[C, F, h, w]` ×3, two text states `[Lt, d_text]`,
 *   and the decoded frames (float `[F, H, W, 3]` plus RGB24 bytes);
 * - peak: activations of one DiT forward over 2 rows (guidance) — tokens × (10·dim + 2·ffnDim) floats per row —
 *   plus the VAE decoder's widest intermediates (F·H·W·(c_last + 27·c_last) floats for im2col).
 * An estimate for admission (conservative, not exact): the arena planner reuses memory below it.
 */
export function estimateMemory(p: ResolvedParams, spec: ModelSpec): { residentBytes: number; peakBytes: number } {
  const s = vaeScale(spec);
  const [pt, ph, pw] = spec.transformer.patchSize;
  const latent = spec.vae.zDim * p.numFrames * (p.height / s) * (p.width / s);
  const text = spec.textEncoder.maxLength * spec.textEncoder.dModel;
  const pixels = p.numFrames * p.width * p.height;
  const residentBytes = 4 * (3 * latent + 2 * text + 3 * pixels) + 3 * pixels;
  const tokens = (p.numFrames / pt) * (p.height / s / ph) * (p.width / s / pw);
  const dit = 2 * tokens * (10 * spec.transformer.dim + 2 * spec.transformer.ffnDim);
  const last = spec.vae.channels[spec.vae.channels.length - 1];
  const vae = pixels * last * 28;
  return { residentBytes, peakBytes: 4 * Math.max(dit, vae) };
}

/**
 * The denoise work of a request (`denoiseWork`) keyed as the denoise loop keys its steps for the cost model: guided
 * steps at the CFG policy's dispatch (`batched` or `sequential`), the others at `single`.
 */
export function wanRequestWork(p: ResolvedParams, nodeParams: Record<string, unknown>, policies: PipelinePolicies, spec: ModelSpec): RequestWork {
  const { steps, guidedSteps, forwards } = denoiseWork(p, nodeParams, policies.cfg);
  const [pt, ph, pw] = spec.transformer.patchSize;
  const s = vaeScale(spec);
  const key = { model: `${spec.id}/transformer`, phase: 'denoise', shape: `${p.numFrames / pt}x${(p.height / s / ph) * ph}x${(p.width / s / pw) * pw}` };
  const guided = policies.cfg.variant === 'batched' ? 'batched' : 'sequential';
  return {
    steps,
    forwards,
    costs: [
      { cost: { ...key, guidance: guided }, steps: guidedSteps },
      { cost: { ...key, guidance: 'single' }, steps: steps - guidedSteps },
    ],
  };
}
