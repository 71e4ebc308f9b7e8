import { OmniError, type OmniRequest } from 'omnirx';
import { resolveDiffusionParams, type RequestWork, type ResolveEnv } from 'omnirx/families';
import type { ResolvedParams } from 'omnirx/pipeline';
import { guidedSteps } from './pipeline';
import { patchValues, TOY_FAMILY, type ToySpec } from './spec';

/**
 * A toy-image request's parameters. The family makes images only and samples with (stochastic) Euler; it has no latents
 * and no previews to return. Width and height must be multiples of the denoiser's patch; the patches are its tokens.
 * Nothing the model cannot honour is adjusted: it is refused naming the field. (The engine refuses a task outside the
 * family's `tasks` before this runs.)
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (`diffusion.sampler`, `outputs.returnLatents`,
 *   `outputs.previewEvery`, and what `resolveDiffusionParams` refuses).
 */
export function resolveToyParams(req: OmniRequest, spec: ToySpec, env: ResolveEnv): ResolvedParams {
  const refuse = (param: string, message: string): never => {
    throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `model '${spec.id}' (family '${TOY_FAMILY}') ${message}`, { param });
  };
  const sampler = req.diffusion.sampler ?? env.policies.sampler.defaultSampler;
  if (sampler !== 'euler') refuse('diffusion.sampler', `samples with euler only, got ${sampler}`);
  if (req.outputs.returnLatents || (req.outputs.modalities ?? []).includes('latents'))
    refuse('outputs.returnLatents', 'denoises in pixel space and has no latents to return');
  if (req.outputs.previewEvery !== undefined) refuse('outputs.previewEvery', 'streams no previews');
  const p = spec.denoiser.patch;
  return resolveDiffusionParams(req, spec, env, { pixelStride: p, strideOrigin: 'the denoiser patch', latentTokens: (q) => (q.width / p) * (q.height / p) });
}

/**
 * Memory a request holds (float32 JS arrays): resident — the image, its velocity and the negative velocity
 * `[3, H, W]` ×3, two embeddings, the RGB24 output; peak — one patch's activations and the decoder's output.
 */
export function toyClaim(p: ResolvedParams, spec: ToySpec): { residentBytes: number; peakBytes: number } {
  const pixels = p.width * p.height;
  return { residentBytes: 4 * (9 * pixels + 2 * spec.embedder.dim) + 3 * pixels, peakBytes: 8 * (patchValues(spec) + spec.denoiser.hidden) + 3 * pixels };
}

/** One denoiser forward per step, two on a guided step; guided and single steps priced apart. */
export function toyWork(p: ResolvedParams, _nodeParams: Record<string, unknown>, _policies: unknown, spec: ToySpec): RequestWork {
  const guided = guidedSteps(p);
  const key = { model: `${spec.id}/denoiser`, phase: 'denoise', shape: `${p.height}x${p.width}` };
  return {
    steps: p.numInferenceSteps,
    forwards: p.numInferenceSteps + guided,
    costs: [
      { cost: { ...key, guidance: 'cfg' }, steps: guided },
      { cost: { ...key, guidance: 'none' }, steps: p.numInferenceSteps - guided },
    ],
  };
}
