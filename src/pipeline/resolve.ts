import { OmniError } from '../errors';
import type { OmniRequest } from '../request/omni-request';
import { randomSeed } from '../util/rng';
import type { ResolveEnv } from './family/family';
import type { ModelSpecBase } from './family/model-spec';
import type { ResolvedParams } from './params';

/** What a diffusion family tells `resolveDiffusionParams` about its model's geometry. */
export interface DiffusionGeometry {
  /** Width and height must be multiples of it, pixels (VAE scale × the denoiser's spatial patch). */
  pixelStride: number;
  /** What the stride is made of, for the error message (e.g. "VAE scale × DiT patch"). */
  strideOrigin: string;
  /** Tokens the denoiser attends over at this size and frame count (checked against `limits.maxTokens`). */
  latentTokens(p: Pick<ResolvedParams, 'width' | 'height' | 'numFrames'>): number;
}

/**
 * Applies the model's defaults (and the deployment's flow-shift policy, sampler, η and guidance interval) to a validated
 * request and checks what only the model and the combined ceilings can decide. Values the model cannot honour are rejected, never
 * adjusted.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (width/height not a multiple of the model's stride, an output the
 *   task does not produce) or OMNIRX_ERR_INVALID_REQUEST (a combined ceiling), with `param` naming the field.
 */
export function resolveDiffusionParams(req: OmniRequest, spec: ModelSpecBase, env: ResolveEnv, geometry: DiffusionGeometry): ResolvedParams {
  const { limits, policies } = env;
  const d = spec.defaults;
  const x = req.diffusion;
  const isImage = req.task === 'T2I';
  const width = x.width ?? d.width;
  const height = x.height ?? d.height;
  const p: ResolvedParams = {
    task: req.task,
    model: spec.id,
    prompt: req.inputs.prompt,
    negativePrompt: req.inputs.negativePrompt,
    width,
    height,
    numFrames: isImage ? 1 : (x.numFrames ?? d.numFrames),
    fps: x.fps ?? d.fps,
    numInferenceSteps: policies.sampler.steps(x.sampler, x.numInferenceSteps, d.numInferenceSteps),
    guidanceScale: x.guidanceScale ?? d.guidanceScale,
    guidanceInterval: x.guidanceInterval ?? d.guidanceInterval ?? policies.cfg.interval,
    flowShift: policies.flowShift.resolve(x.flowShift, d.flowShift, width, height),
    sampler: x.sampler ?? policies.sampler.defaultSampler,
    eta: policies.sampler.eta(x.sampler, x.eta, d.eta),
    seed: x.seed ?? randomSeed(),
    modalities: req.outputs.modalities ?? [isImage ? 'image' : 'video'],
    returnLatents: req.outputs.returnLatents || (req.outputs.modalities ?? []).includes('latents'),
    ...(req.outputs.previewEvery !== undefined ? { previewEvery: req.outputs.previewEvery } : {}),
    ...(!isImage && (req.outputs.decodeChunkFrames ?? 0) > 0 ? { decodeChunkFrames: req.outputs.decodeChunkFrames } : {}),
    priority: req.priority,
  };
  const stride = geometry.pixelStride;
  for (const field of ['width', 'height'] as const) {
    if (p[field] % stride !== 0) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `${field} ${p[field]} is not a multiple of ${stride}, the pixel stride of model '${p.model}' (${geometry.strideOrigin})`,
        { param: `diffusion.${field}` },
      );
    }
  }
  const wanted = isImage ? 'image' : 'video';
  for (const m of p.modalities) {
    if (m !== wanted && m !== 'latents') {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `task ${p.task} produces ${wanted}, not ${m}`, { param: 'outputs.modalities' });
    }
  }
  if (p.width * p.height > limits.maxPixels) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `width × height = ${p.width * p.height} exceeds the ceiling of ${limits.maxPixels} pixels`, {
      param: 'diffusion.width',
    });
  }
  const tokens = geometry.latentTokens(p);
  if (tokens > limits.maxTokens) {
    throw new OmniError(
      'OMNIRX_ERR_INVALID_REQUEST',
      `${p.width}×${p.height} × ${p.numFrames} frames is ${tokens} latent tokens for model '${p.model}', over the ceiling of ${limits.maxTokens} (attention cost grows with its square); use fewer frames or a smaller size`,
      { param: 'diffusion.numFrames' },
    );
  }
  const work = p.width * p.height * p.numFrames * p.numInferenceSteps;
  if (work > limits.maxWork) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `width × height × numFrames × numInferenceSteps = ${work} exceeds the ceiling of ${limits.maxWork}`, {
      param: 'diffusion',
    });
  }
  return p;
}
