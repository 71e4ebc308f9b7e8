import { filter, type MonoTypeOperatorFunction } from 'rxjs';
import type { OmniEvent } from 'omnirx';

/**
 * Thins a request's `step` events to every `n`th step of each loop node, always keeping a node's last step; every
 * other event passes unchanged. For progress displays that should not redraw on every denoise step.
 *
 * Intuition: a progress bar that ticks every n steps and never misses the end.
 *
 * ```
 * events: a-s-s-s-s-s-f|      (s: steps 0..4 of 5)
 * n = 2:  a---s---s-s-f|      (steps 1, 3 and the last, 4)
 * ```
 *
 * Completes and errors with its source; keeps no state between subscriptions.
 *
 * ## Example
 * ```ts
 * engine.generate(request).pipe(progressEvery(5)).subscribe(render);
 * ```
 * @param n keep one step in `n` (a positive integer).
 * @throws RangeError when `n` is not a positive integer.
 */
export function progressEvery(n: number): MonoTypeOperatorFunction<OmniEvent> {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`progressEvery: n must be a positive integer, got ${n}`);
  return filter((e) => e.type !== 'step' || (e.index + 1) % n === 0 || e.index + 1 === e.total);
}
