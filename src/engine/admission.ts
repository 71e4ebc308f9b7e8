import { OmniError } from '../errors';
import type { WanT2VModel } from '../families/wan/model';
import type { CFGPolicy } from '../pipeline/policies/cfg';
import type { FlowShiftPolicy } from '../pipeline/policies/flow-shift';
import type { SamplerPolicy } from '../pipeline/policies/sampler-policy';
import type { ResolvedParams } from '../pipeline/params';
import type { RequestLimits } from '../request/limits';
import type { OmniRequest } from '../request/omni-request';
import { randomSeed } from '../util/rng';

/**
 * Applies the model's defaults (and the deployment's flow-shift policy, sampler, η and guidance interval) to a validated
 * request and checks what only the model and the combined ceilings can decide. Values the model cannot honour are rejected, never
 * adjusted.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (width/height not a multiple of the model's stride, an output the
 *   task does not produce) or OMNIRX_ERR_INVALID_REQUEST (a combined ceiling), with `param` naming the field.
 */
export function resolveParams(req: OmniRequest, model: WanT2VModel, limits: RequestLimits, policies: { cfg: CFGPolicy; flowShift: FlowShiftPolicy; sampler: SamplerPolicy }): ResolvedParams {
  const d = model.spec.defaults;
  const x = req.diffusion;
  const isImage = req.task === 'T2I';
  const width = x.width ?? d.width;
  const height = x.height ?? d.height;
  const p: ResolvedParams = {
    task: req.task,
    model: model.spec.id,
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
    priority: req.priority,
  };
  const stride = model.pixelStride;
  for (const field of ['width', 'height'] as const) {
    if (p[field] % stride !== 0) {
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${field} ${p[field]} is not a multiple of ${stride}, the pixel stride of model '${p.model}' (VAE scale × DiT patch)`, { param: `diffusion.${field}` });
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
  const [pt, ph, pw] = model.spec.transformer.patchSize;
  const s = 2 ** (model.spec.vae.channels.length - 1);
  const tokens = Math.ceil(p.numFrames / pt) * (p.height / s / ph) * (p.width / s / pw);
  if (tokens > limits.maxTokens) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `${p.width}×${p.height} × ${p.numFrames} frames is ${tokens} latent tokens for model '${p.model}', over the ceiling of ${limits.maxTokens} (attention cost grows with its square); use fewer frames or a smaller size`, { param: 'diffusion.numFrames' });
  }
  const work = p.width * p.height * p.numFrames * p.numInferenceSteps;
  if (work > limits.maxWork) {
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `width × height × numFrames × numInferenceSteps = ${work} exceeds the ceiling of ${limits.maxWork}`, { param: 'diffusion' });
  }
  return p;
}

/**
 * Memory a request needs, from its shapes (float32 everywhere):
 * - resident: the latents and the two guidance predictions `[C, F, h, w]` ×3, two text states `[Lt, d_text]`,
 *   and the decoded frames (float `[F, H, W, 3]` plus RGB24 bytes);
 * - peak: activations of one DiT forward over 2 rows (guidance) — tokens × (10·dim + 2·ffnDim) floats per row —
 *   plus the VAE decoder's widest intermediates (F·H·W·(c_last + 27·c_last) floats for im2col).
 * An estimate for admission (conservative, not exact): the arena planner reuses memory below it.
 */
export function estimateMemory(p: ResolvedParams, model: WanT2VModel): { residentBytes: number; peakBytes: number } {
  const spec = model.spec;
  const s = 2 ** (spec.vae.channels.length - 1);
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
