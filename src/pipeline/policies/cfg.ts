import { isGuidanceInterval, type GuidanceInterval } from '../../request/guidance-interval';
import type { Policy } from './policy';

/** How the guidance branches of one step are dispatched. */
export type GuidanceDispatch = 'single' | 'sequential' | 'batched';

/** What a CFG policy decides for one step. */
export interface GuidancePlan {
  /** 'single': only the conditional forward (no guidance this step). */
  dispatch: GuidanceDispatch;
  scale: number;
}

/**
 * Classifier-free guidance (Ho & Salimans 2022) as a policy: which branches a step runs and how they are
 * dispatched; the combine is v = v_u + g·(v_c − v_u) for every variant.
 * - `classic`: two forwards (conditional, then unconditional), batch 1 each;
 * - `batched`: one forward with the two branches stacked as a batch of 2;
 * - `none`: one conditional forward (distilled or embedded-guidance models).
 * `interval` gates guidance to steps whose fraction i/N lies in [start, end) (Kynkäänniemi et al. 2024,
 * "Applying guidance in a limited interval"); outside it a step runs the conditional branch only. The policy's
 * interval is the deployment's default: a request's resolved `guidanceInterval` (its own, else its model's default,
 * else this one) is passed to `plan` and `needsNegative`. A scale of 1 never needs the unconditional branch.
 */
export class CFGPolicy implements Policy {
  readonly slot = 'guidance' as const;
  readonly name: string;

  private constructor(
    readonly variant: 'classic' | 'batched' | 'none',
    readonly interval: GuidanceInterval,
  ) {
    if (!isGuidanceInterval(interval)) throw new RangeError(`CFG interval [${(interval as readonly number[]).join(', ')}] must satisfy 0 ≤ start ≤ end ≤ 1`);
    this.name = `${variant}-cfg${interval[0] > 0 || interval[1] < 1 ? `[${interval[0]},${interval[1]})` : ''}`;
  }

  static classic(interval: GuidanceInterval = [0, 1]): CFGPolicy {
    return new CFGPolicy('classic', interval);
  }

  static batched(interval: GuidanceInterval = [0, 1]): CFGPolicy {
    return new CFGPolicy('batched', interval);
  }

  static none(): CFGPolicy {
    return new CFGPolicy('none', [0, 1]);
  }

  /**
   * True when this scale and guidance interval allow guidance at all (not the none variant, scale ≠ 1, a non-empty
   * interval). Whether a step of a given count falls in the interval is `plan`'s to say (`denoiseWork` counts them).
   */
  needsNegative(scale: number, interval: GuidanceInterval = this.interval): boolean {
    return this.variant !== 'none' && scale !== 1 && interval[1] > interval[0];
  }

  /** The plan for step `index` of `total`, guided when `interval` (default: the policy's) holds index/total. */
  plan(index: number, total: number, scale: number, interval: GuidanceInterval = this.interval): GuidancePlan {
    const f = index / total;
    const on = this.needsNegative(scale, interval) && f >= interval[0] && f < interval[1];
    if (!on) return { dispatch: 'single', scale: 1 };
    return { dispatch: this.variant === 'batched' ? 'batched' : 'sequential', scale };
  }

  /** Forwards per step when guidance is on (cost model key). */
  get guidanceKey(): string {
    return this.name;
  }
}
