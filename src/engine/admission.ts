import { OmniError } from '../errors';
import type { WanT2VModel } from '../models/wan/wan-t2v';
import type { ResolvedParams } from '../pipeline/params';
import type { RequestLimits } from '../request/limits';
import type { OmniRequest } from '../request/omni-request';
import { randomSeed } from '../util/rng';

/**
 * Applies the model's defaults to a validated request and checks what only the model and the combined ceilings
 * can decide. Values the model cannot honour are rejected, never adjusted.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (width/height not a multiple of the model's stride) or
 *   OMNIRX_ERR_INVALID_REQUEST (a combined ceiling), with `param` naming the field.
 */
export function resolveParams(req: OmniRequest, model: WanT2VModel, limits: RequestLimits): ResolvedParams {
  const d = model.spec.defaults;
  const x = req.diffusion;
  const isImage = req.task === 'T2I';
  const p: ResolvedParams = {
    task: req.task,
    model: model.spec.id,
    prompt: req.inputs.prompt,
    negativePrompt: req.inputs.negativePrompt,
    width: x.width ?? d.width,
    height: x.height ?? d.height,
    numFrames: isImage ? 1 : (x.numFrames ?? d.numFrames),
    fps: x.fps ?? d.fps,
    numInferenceSteps: x.numInferenceSteps ?? d.numInferenceSteps,
    guidanceScale: x.guidanceScale ?? d.guidanceScale,
    flowShift: x.flowShift ?? d.flowShift,
    seed: x.seed ?? randomSeed(),
    modalities: req.outputs.modalities ?? [isImage ? 'image' : 'video'],
    returnLatents: req.outputs.returnLatents || (req.outputs.modalities ?? []).includes('latents'),
  };
  const stride = model.pixelStride;
  for (const field of ['width', 'height'] as const) {
    if (p[field] % stride !== 0) {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${field} ${p[field]} is not a multiple of ${stride}, the pixel stride of model '${p.model}' (VAE ${model.vae.scaleFactor}× · patch ${model.transformer.spatialStride})`, { param: `diffusion.${field}` });
    }
  }
  const wanted = isImage ? 'image' : 'video';
  for (const m of p.modalities) {
    if (m !== wanted && m !== 'latents') {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `task ${p.task} produces ${wanted}, not ${m}`, { param: 'outputs.modalities' });
    }
  }
  if (p.width * p.height > limits.maxPixels) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `width × height = ${p.width * p.height} exceeds the ceiling of ${limits.maxPixels} pixels`, { param: 'diffusion.width' });
  }
  const work = p.width * p.height * p.numFrames * p.numInferenceSteps;
  if (work > limits.maxWork) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `width × height × numFrames × numInferenceSteps = ${work} exceeds the ceiling of ${limits.maxWork}`, { param: 'diffusion' });
  }
  return p;
}
