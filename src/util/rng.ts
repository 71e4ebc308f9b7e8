/**
 * Seeded pseudo-random numbers for initial noise and seeded weights: xoshiro128** (Blackman & Vigna,
 * "Scrambled linear pseudorandom number generators", 2021) seeded through splitmix32, with standard normals from
 * the Box–Muller transform. Deterministic across platforms (32-bit integer arithmetic only, then float64 maths).
 * State lives in the instance: one generator per request.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  private spare: number | undefined;

  /** @param seed an unsigned 32-bit integer */
  constructor(seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Next unsigned 32-bit integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform in (0, 1): never exactly 0, so log() is safe. */
  uniform(): number {
    return (this.nextU32() + 0.5) / 4294967296;
  }

  /** Standard normal N(0, 1) (Box–Muller, both values used). */
  normal(): number {
    if (this.spare !== undefined) {
      const v = this.spare;
      this.spare = undefined;
      return v;
    }
    const r = Math.sqrt(-2 * Math.log(this.uniform()));
    const theta = 2 * Math.PI * this.uniform();
    this.spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  /** Fills `out` with N(0, std²) samples. */
  fillNormal(out: Float32Array, std = 1): Float32Array {
    for (let i = 0; i < out.length; i++) out[i] = this.normal() * std;
    return out;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A random unsigned 32-bit seed for requests that did not give one. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 4294967296) >>> 0;
}

/**
 * Seed of the re-noising stream (DMD, Euler at η > 0) that belongs to a noise seed: the seed mixed with a constant
 * (MurmurHash2's 0x5bd1e995), so re-noising draws apart from the initial noise and the initial noise stays the same.
 */
export function renoiseSeed(noiseSeed: number): number {
  return (noiseSeed ^ 0x5bd1e995) >>> 0;
}
