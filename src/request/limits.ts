/**
 * Resource ceilings applied while a request is validated (docs/design.md §2: ceilings are part of validation, so bad
 * input never reaches a loop). A deployment may lower them; raising them past what the machine can hold is the
 * operator's responsibility.
 */
export interface RequestLimits {
  /** Largest width or height, pixels. */
  readonly maxSide: number;
  /** Largest width × height, pixels. */
  readonly maxPixels: number;
  /** Largest number of video frames. */
  readonly maxFrames: number;
  /** Largest num_inference_steps. */
  readonly maxSteps: number;
  /** Largest width × height × frames × steps: a bound on the denoise work one request may ask for. */
  readonly maxWork: number;
  /** Most latent tokens one DiT forward may attend over (attention cost grows with its square). */
  readonly maxTokens: number;
  /** Longest prompt or negative prompt, UTF-16 code units. */
  readonly maxPromptChars: number;
}

/**
 * Ceilings sized for a 2-core CPU machine serving the small embedded models: the largest request they admit
 * (e.g. 128×128 × 64 frames × 50 steps, or 256×256 × 16 frames × 50 steps) finishes in minutes, not hours —
 * attention cost grows with the square of width × height × frames.
 */
export const DEFAULT_LIMITS: RequestLimits = Object.freeze({
  maxSide: 1024,
  maxPixels: 512 * 512,
  maxFrames: 256,
  maxSteps: 200,
  maxWork: 128 * 128 * 64 * 50,
  maxTokens: 4096,
  maxPromptChars: 4000,
});
