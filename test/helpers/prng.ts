import { Rng } from '../../src/util/rng';

/** A seeded uniform [0, 1) source for fuzz loops, from the project's own generator (reproducible per seed). */
export function prng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.uniform();
}
