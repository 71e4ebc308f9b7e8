/**
 * Classifier-free guidance (Ho & Salimans 2022): v = v_u + g·(v_c − v_u), written into `cond` in place.
 * `cond`/`uncond` are the conditional and unconditional predictions of the same shape.
 */
export function applyClassifierFreeGuidance(cond: Float32Array, uncond: Float32Array, scale: number): void {
  if (cond.length !== uncond.length) throw new RangeError(`CFG: predictions differ in size (${cond.length} vs ${uncond.length})`);
  for (let i = 0; i < cond.length; i++) cond[i] = uncond[i] + scale * (cond[i] - uncond[i]);
}

/** Index of the first non-finite value, or −1 (the NaN watch after every step). */
export function firstNonFinite(x: Float32Array): number {
  for (let i = 0; i < x.length; i++) if (!Number.isFinite(x[i])) return i;
  return -1;
}
