import { OmniError } from '../errors';

/**
 * Frames of a clip `seconds` long at `fps`: `seconds × fps`, which must be a whole number of frames (never rounded
 * to another length; a product within 1e-9 of an integer, such as 1.1 × 10, counts as that integer).
 * @param seconds clip length, s (> 0).
 * @param fps playback rate, frames per second (a positive integer).
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE (`param` "seconds") when the product is not a whole number of frames.
 */
export function framesForSeconds(seconds: number, fps: number): number {
  const frames = seconds * fps;
  const whole = Math.round(frames);
  if (Math.abs(frames - whole) > 1e-9 * Math.max(1, whole) || whole < 1) {
    throw new OmniError(
      'OMNIRX_ERR_UNSUPPORTED_VALUE',
      `seconds ${seconds} × fps ${fps} = ${frames} frames is not a whole number of frames; give a frame count or another length`,
      { param: 'seconds' },
    );
  }
  return whole;
}
