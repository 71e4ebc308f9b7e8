import type { Policy } from './policy';

/**
 * Which transformer runs a step. `single` always uses one component; `boundary` switches from `high` to `low`
 * once the timestep falls below `boundary`·1000 (Wan 2.2's MoE `boundary_ratio`: the high-noise expert for the
 * early steps, the low-noise expert after).
 */
export class ExpertRouting implements Policy {
  readonly slot = 'expert' as const;
  readonly name: string;

  private constructor(
    readonly high: string,
    readonly low: string,
    /** Fraction of the timestep range in (0, 1]; t ≥ boundary·1000 runs `high`. */
    readonly boundary: number,
  ) {
    this.name = high === low ? `single(${high})` : `boundary(${high}→${low}@${boundary})`;
  }

  static single(component = 'transformer'): ExpertRouting {
    return new ExpertRouting(component, component, 0);
  }

  static boundary(high: string, low: string, boundary: number): ExpertRouting {
    if (!(boundary > 0 && boundary <= 1)) throw new RangeError(`expert boundary must be in (0, 1], got ${boundary}`);
    return new ExpertRouting(high, low, boundary);
  }

  /** Components this policy may call. */
  get components(): string[] {
    return this.high === this.low ? [this.high] : [this.high, this.low];
  }

  /** The component for a step at timestep `t` (σ·1000). */
  select(t: number): string {
    return t >= this.boundary * 1000 ? this.high : this.low;
  }
}
