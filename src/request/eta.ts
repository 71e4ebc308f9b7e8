import { z } from 'zod';

/**
 * η of the Euler sampler: the share of fresh noise in each step's re-noising, a number in [0, 1]
 * (`stochasticEulerStep`, src/pipeline/samplers/flow-match-euler.ts). 0 is the deterministic Euler step; 1 re-noises
 * the predicted clean latents with fresh noise alone. One range for requests (`diffusion.eta`, HTTP `eta`), model
 * defaults (`model.json` `defaults.eta`) and stage payloads.
 */
export const EtaSchema = z
  .number({ error: (issue) => (issue.code === 'invalid_type' ? 'expected η, a number in [0, 1] (0: deterministic Euler steps)' : undefined) })
  .min(0)
  .max(1);
