import { z } from 'zod';

/**
 * The denoise steps classifier-free guidance runs on, as fractions of the step count: step i of N is guided when
 * start ≤ i/N < end (Kynkäänniemi et al. 2024, "Applying guidance in a limited interval improves sample and
 * distribution quality in diffusion models"). [0, 1] guides every step; an empty interval (start = end) none.
 */
export type GuidanceInterval = [start: number, end: number];

/** The guidance interval of a request, a model's defaults or a stage payload: two fractions in [0, 1], start ≤ end. */
export const GuidanceIntervalSchema = z
  .tuple([z.number().min(0).max(1), z.number().min(0).max(1)], {
    error: (issue) =>
      issue.code === 'invalid_type' ? 'expected [start, end], two fractions of the denoise steps in [0, 1] (as text: "start,end", e.g. "0,0.25")' : undefined,
  })
  .refine(([start, end]) => start <= end, { message: 'start must not exceed end ([start, end) are fractions of the denoise steps)' });

/** True when `[start, end]` is a guidance interval (finite fractions in [0, 1], start ≤ end). */
export function isGuidanceInterval(interval: readonly number[]): interval is GuidanceInterval {
  return GuidanceIntervalSchema.safeParse(interval).success;
}

/**
 * Reads a guidance interval written as text, "start,end" (as a CLI flag or a multipart form field gives it), e.g.
 * "0,0.25": two decimal numbers, each optionally signed, with or without a leading digit (".5"), or in exponent
 * notation (the CLI's number syntax). Only the text is checked here; whether the pair is a guidance interval is
 * `GuidanceIntervalSchema`'s to say, so its message names the real problem (a start after the end, a fraction out
 * of [0, 1]).
 * @returns the two numbers, or undefined when the text is not two decimal numbers separated by one comma
 */
export function parseGuidanceIntervalText(raw: string): [number, number] | undefined {
  const parts = raw.split(',');
  if (parts.length !== 2 || !parts.every((x) => /^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$/.test(x))) return undefined;
  return [Number(parts[0]), Number(parts[1])];
}
