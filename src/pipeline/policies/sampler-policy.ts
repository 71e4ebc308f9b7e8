import { OmniError } from '../../errors';
import { dmdSampler, type DmdSampler } from '../samplers/dmd';
import { flowMatchEulerSampler, type Sampler } from '../samplers/sampler';
import { uniPC } from '../samplers/unipc';
import type { Policy } from './policy';

export const SAMPLER_NAMES = ['euler', 'unipc', 'dmd'] as const;
export type SamplerName = (typeof SAMPLER_NAMES)[number];

/**
 * Which sampler a denoise loop uses: flow-matching Euler, UniPC (order 2) or a DMD few-step schedule. The
 * deployment binds the default and the DMD timestep list; a request may name another sampler in
 * `diffusion.sampler`. DMD's step count is the length of its timestep list: a request that asks for another
 * count is rejected, never adjusted.
 */
export class SamplerPolicy implements Policy {
  readonly slot = 'sampler' as const;
  readonly name: string;
  private readonly dmd: DmdSampler;

  private constructor(
    readonly defaultSampler: SamplerName,
    dmdTimesteps?: readonly number[],
  ) {
    this.dmd = dmdSampler(dmdTimesteps === undefined ? {} : { timesteps: dmdTimesteps });
    this.name = `sampler(${defaultSampler})`;
  }

  static of(defaultSampler: SamplerName = 'euler', options: { dmdTimesteps?: readonly number[] } = {}): SamplerPolicy {
    return new SamplerPolicy(defaultSampler, options.dmdTimesteps);
  }

  /** The sampler for a request (its own choice, else the default). */
  sampler(name: SamplerName | undefined): Sampler {
    switch (name ?? this.defaultSampler) {
      case 'unipc':
        return uniPC;
      case 'dmd':
        return this.dmd;
      default:
        return flowMatchEulerSampler;
    }
  }

  /**
   * Steps the request will run: DMD's list length (rejecting an explicit other count), else the requested or
   * default count.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE with param `diffusion.numInferenceSteps`.
   */
  steps(name: SamplerName | undefined, requested: number | undefined, modelDefault: number): number {
    if ((name ?? this.defaultSampler) !== 'dmd') return requested ?? modelDefault;
    const n = this.dmd.timesteps.length;
    if (requested !== undefined && requested !== n) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `the dmd sampler runs its ${n} distilled timesteps (${this.dmd.timesteps.join(', ')}); numInferenceSteps must be ${n} or left out`,
        { param: 'diffusion.numInferenceSteps' },
      );
    }
    return n;
  }

  /**
   * η (the share of fresh noise re-noising each Euler step, `stochasticEulerStep`) the request will run: its own,
   * else the model's default for Euler, else 0. Only Euler re-noises this way: a request that gives another
   * sampler an η above 0 is rejected, and the model's default does not apply to it.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE with param `diffusion.eta`.
   */
  eta(name: SamplerName | undefined, requested: number | undefined, modelDefault: number | undefined): number {
    const sampler = name ?? this.defaultSampler;
    if (sampler === 'euler') return requested ?? modelDefault ?? 0;
    if (requested !== undefined && requested !== 0) {
      throw new OmniError(
        'OMNIRX_ERR_UNSUPPORTED_VALUE',
        `eta re-noises the euler sampler's steps; the ${sampler} sampler takes none (got ${requested}): leave eta out or use sampler euler`,
        { param: 'diffusion.eta' },
      );
    }
    return 0;
  }
}
