import type { StepCost } from '../../pipeline/step-grants';

export interface CostModelOptions {
  /** Predicted ms for a key that has neither measurements nor a seed (default 100). */
  defaultMs?: number;
  /** Configured predictions, keyed by `CostModel.keyOf(k)` (ms per step). */
  seed?: Record<string, number>;
  /** Weight of a new measurement in the moving average, in (0, 1] (default 0.25). */
  alpha?: number;
}

/** Separators inside a key part are escaped so distinct keys never collide. */
function escapePart(part: string): string {
  return part.replace(/\\/g, '\\\\').replace(/\|/g, '\\|');
}

function checkMs(name: string, v: number): number {
  if (!Number.isFinite(v) || v < 0) throw new RangeError(`CostModel: ${name} must be a finite number ≥ 0, got ${v}`);
  return v;
}

/**
 * Predicted milliseconds per step, keyed by (model, phase, shape, guidance mode): the budget currency of the
 * StepScheduler and of admission estimates (a step is not a token — a 4-step and a 50-step job, or a 256² image
 * step and a 720p video step, differ by orders of magnitude).
 *
 * Intuition: a table seeded from config whose entries follow the measured step times.
 *
 * `predict(k)` is the exponential moving average of the measurements of `k` when there are any (the first
 * measurement replaces the prior outright, later ones move the average by `alpha`), else the seeded value, else
 * `defaultMs`. Measurements that are not finite or are negative are ignored. Instances share nothing.
 *
 * ## Example
 * ```ts
 * const costs = new CostModel({ seed: { [CostModel.keyOf(k)]: 250 } });
 * costs.predict(k); // 250 (seed)
 * costs.observe(k, 200);
 * costs.predict(k); // 200 (measured)
 * ```
 */
export class CostModel {
  private readonly defaultMs: number;
  private readonly alpha: number;
  private readonly seeded = new Map<string, number>();
  private readonly measured = new Map<string, { ema: number; n: number }>();

  constructor(options: CostModelOptions = {}) {
    this.defaultMs = checkMs('defaultMs', options.defaultMs ?? 100);
    const alpha = options.alpha ?? 0.25;
    if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`CostModel: alpha must be in (0, 1], got ${alpha}`);
    this.alpha = alpha;
    for (const [key, ms] of Object.entries(options.seed ?? {})) this.seeded.set(key, checkMs(`seed['${key}']`, ms));
  }

  /** A stable string for a key: `model|phase|shape|guidance` (a `|` or `\` inside a part is backslash-escaped). */
  static keyOf(k: StepCost): string {
    return [k.model, k.phase, k.shape, k.guidance].map(escapePart).join('|');
  }

  /** Predicted ms for one step of `k`: measured average if any, else the seed, else `defaultMs`. */
  predict(k: StepCost): number {
    const key = CostModel.keyOf(k);
    return this.measured.get(key)?.ema ?? this.seeded.get(key) ?? this.defaultMs;
  }

  /** Folds one measured step time into the average of `k`; non-finite or negative values are ignored. */
  observe(k: StepCost, ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    const key = CostModel.keyOf(k);
    const m = this.measured.get(key);
    if (m === undefined) {
      this.measured.set(key, { ema: ms, n: 1 });
    } else {
      m.ema += this.alpha * (ms - m.ema);
      m.n += 1;
    }
  }

  /** How many measurements of `k` have been folded in. */
  samples(k: StepCost): number {
    return this.measured.get(CostModel.keyOf(k))?.n ?? 0;
  }
}
