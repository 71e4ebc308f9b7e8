import { randomInt } from 'node:crypto';
import { OmniError } from '../../errors';
import type { WanT2VModel } from './model';
import type { SessionRequest } from '../../request/session-request';

/** A world session's values after the model's defaults: pixels, frames per second, the seed actually used, η. */
export interface ResolvedSessionParams {
  width: number;
  height: number;
  fps: number;
  seed: number;
  flowShift: number;
  /** Share of fresh noise re-noising each Euler step of every chunk, [0, 1]. */
  eta: number;
  priority: number;
}

/**
 * Applies the model's defaults to a validated session request (size from the request, else the image, else the
 * model; a random seed when none is given; η from the request, else the model's world-session default
 * `defaults.world.eta`, else 0) and checks what only the model can: the size must be a multiple of its
 * pixel stride.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE naming `width` or `height`.
 */
export function resolveSessionParams(req: SessionRequest, model: WanT2VModel): ResolvedSessionParams {
  const width = req.width ?? req.image?.width ?? model.spec.defaults.width;
  const height = req.height ?? req.image?.height ?? model.spec.defaults.height;
  const stride = model.pixelStride;
  for (const [field, v] of [['width', width], ['height', height]] as const) {
    if (v % stride !== 0) throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${field} ${v} is not a multiple of ${stride} (VAE scale × patch size of '${model.spec.id}')`, { param: field });
  }
  return { width, height, fps: req.fps, seed: req.seed ?? randomInt(0, 2 ** 32), flowShift: req.flowShift ?? model.spec.defaults.flowShift, eta: req.eta ?? model.spec.defaults.world?.eta ?? 0, priority: req.priority };
}
