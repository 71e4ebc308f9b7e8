/**
 * Shared helpers for the native tests: seeded random tensors, a one-call "compile, bind, run, read back, dispose"
 * and a tolerance check that names the worst element.
 */
import { createTensor, loadNative, type NativeBinding, type NativeTensor } from '../../src/native/binding';
import type { PlanBuilder } from '../../src/native/plan-builder';
import { Rng } from '../../src/util/rng';

export const native: NativeBinding = loadNative();

/** Tensors made with `tensor` in the current test; `disposeAll` (run it in afterEach) frees them. */
const live: NativeTensor[] = [];

export function tensor(shape: readonly number[], data?: ArrayLike<number>): NativeTensor {
  const t = createTensor(native, shape, data);
  live.push(t);
  return t;
}

export function disposeAll(): void {
  for (const t of live.splice(0)) t.dispose();
}

/** n standard normals × std, rounded to float32 (the values the kernel sees; references read them back). */
export function randn(rng: Rng, n: number, std = 1): Float32Array {
  return rng.fillNormal(new Float32Array(n), std);
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Compiles `g`, binds a fresh tensor per slot (filled from `feeds`, zeros for the outputs), runs the whole plan and
 * returns a copy of every output slot (slots not in `feeds`). Everything it allocates is disposed before it returns.
 */
export async function execute(g: PlanBuilder, feeds: Record<string, ArrayLike<number>>): Promise<Record<string, Float32Array>> {
  const plan = g.compile(native);
  const bound: Record<string, NativeTensor> = {};
  try {
    for (const s of plan.slots) bound[s.name] = createTensor(native, s.shape, feeds[s.name]);
    await plan.run(bound);
    const out: Record<string, Float32Array> = {};
    for (const s of plan.slots) if (!(s.name in feeds)) out[s.name] = bound[s.name].data.slice();
    return out;
  } finally {
    for (const t of Object.values(bound)) t.dispose();
    plan.dispose();
  }
}

/**
 * Tolerance check: max over i of |actual[i] − ref[i]| / (1 + |ref[i]|) must be ≤ tol (a mixed absolute/relative
 * bound). A NaN reference requires a NaN result and vice versa. Throws with the worst element named; returns the
 * worst error seen so callers may log it.
 */
export function expectClose(actual: ArrayLike<number>, ref: ArrayLike<number>, tol: number, what = 'result'): number {
  if (actual.length !== ref.length) throw new Error(`${what}: ${actual.length} elements, reference has ${ref.length}`);
  let worst = 0;
  let at = -1;
  for (let i = 0; i < ref.length; i++) {
    const a = actual[i];
    const r = ref[i];
    if (Number.isNaN(r) || Number.isNaN(a)) {
      if (Number.isNaN(r) !== Number.isNaN(a)) throw new Error(`${what}[${i}]: got ${a}, reference ${r} (NaN mismatch)`);
      continue;
    }
    const e = Math.abs(a - r) / (1 + Math.abs(r));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  if (!(worst <= tol)) {
    throw new Error(`${what}: max |Δ|/(1+|ref|) = ${worst.toExponential(3)} at [${at}] (got ${actual[at]}, reference ${ref[at]}), tolerance ${tol}`);
  }
  return worst;
}
