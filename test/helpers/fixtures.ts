/**
 * Shared helpers of the parity tests (test/parity) and the DiT benchmark's numerical check (bench/dit-forward.ts):
 * loading the committed reference fixtures (`fixtures.safetensors` + `fixtures.json`), error measures, a recorder
 * that checks a comparison against its tolerance and prints the measured errors under OMNIRX_PARITY_REPORT=1, and a
 * pool of native tensors disposed after each test.
 *
 * Deliberately free of jest globals (`expect`, `afterEach`, …): failed checks throw plain Errors, so bench code can
 * import this module too (tsconfig.build.json compiles it next to the bench).
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { readSafetensors, type SafetensorsFile } from '../../src/models/weights/safetensors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../src/native/binding';

/** test/fixtures/reference: the tiny model (`model/`), the reference fixtures and the causal ones (`causal/`). */
export const REFERENCE_DIR = path.join(__dirname, '..', 'fixtures', 'reference');

/** max|a − ref| / max|ref| in float64; Infinity when `a` holds a non-finite value or the sizes differ. */
export function maxRelErr(a: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (a.length !== ref.length) return Infinity;
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    if (!Number.isFinite(a[i])) return Infinity;
    num = Math.max(num, Math.abs(a[i] - ref[i]));
    den = Math.max(den, Math.abs(ref[i]));
  }
  return num / den;
}

/** max|a − ref| in float64; Infinity when the sizes differ or the difference is NaN. */
export function maxAbsErr(a: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (a.length !== ref.length) return Infinity;
  let m = 0;
  for (let i = 0; i < ref.length; i++) m = Math.max(m, Math.abs(a[i] - ref[i]));
  return Number.isNaN(m) ? Infinity : m;
}

/** [C, F, H, W] → [F, H, W, C] (the reference's channels-first video to omnirx's channels-last frames). */
export function toChannelsLast(x: Float32Array, C: number, F: number, H: number, W: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let c = 0; c < C; c++)
    for (let f = 0; f < F; f++) for (let y = 0; y < H; y++) for (let w = 0; w < W; w++) out[((f * H + y) * W + w) * C + c] = x[((c * F + f) * H + y) * W + w];
  return out;
}

/** Parses the JSON file at path.join(...parts) as `T` (unchecked). */
export function readJson<T = unknown>(...parts: string[]): T {
  return JSON.parse(readFileSync(path.join(...parts), 'utf8')) as T;
}

/** A reference fixture set: the parsed `fixtures.json` and the tensors of `fixtures.safetensors`. */
export interface Fixtures<M> {
  /** The parsed fixtures.json (its shape is the test's business: `M` is not checked). */
  meta: M;
  /** The safetensors file, for anything beyond float32 tensors by name. */
  file: SafetensorsFile;
  /** The float32 tensor `name` of fixtures.safetensors. */
  get(name: string): Float32Array;
}

/** Loads `dir/fixtures.safetensors` and `dir/fixtures.json` (as written by tools/reference/make_*fixtures.py). */
export async function loadFixtures<M>(dir: string): Promise<Fixtures<M>> {
  const file = await readSafetensors(path.join(dir, 'fixtures.safetensors'));
  const meta = readJson<M>(dir, 'fixtures.json');
  return { meta, file, get: (name) => file.float32(name) };
}

/** Records the measured error of each comparison; `check` also enforces its tolerance, `print` reports them all. */
export class ParityReport {
  /** label → measured error, in the order recorded. */
  readonly measured: Record<string, number> = {};

  /** Records `error` under `label` and returns it. */
  record(label: string, error: number): number {
    this.measured[label] = error;
    return error;
  }

  /** Records max relative error of `ours` against `ref` under `label`; throws when it is above `tol` (or NaN). */
  check(label: string, ours: ArrayLike<number>, ref: ArrayLike<number>, tol: number): number {
    const e = this.record(label, maxRelErr(ours, ref));
    if (!(e <= tol)) throw new Error(`${label}: max relative error ${e.toExponential(3)} > ${tol}`);
    return e;
  }

  /** With OMNIRX_PARITY_REPORT set, logs `title` and one line per recorded label (padded to `width`). */
  print(title: string, width = 44): void {
    if (!process.env.OMNIRX_PARITY_REPORT) return;
    const lines = Object.entries(this.measured).map(([k, v]) => `  ${k.padEnd(width)} ${v.toExponential(3)}`);
    console.log(`${title}\n${lines.join('\n')}`);
  }
}

/** Native tensors (and other disposables) owned by the running test; call `disposeAll` in afterEach. */
export class TensorPool {
  private readonly live: Array<{ dispose(): void }> = [];

  /** `native` is read on each call, so the pool can be built before beforeAll loads the binding. */
  constructor(private readonly native: () => NativeBinding) {}

  /** A new tensor of `shape` (filled from `data` when given), disposed by the next `disposeAll`. */
  readonly tensor = (shape: readonly number[], data?: ArrayLike<number>): NativeTensor => this.track(createTensor(this.native(), shape, data));

  /** Hands `x` to the pool and returns it. */
  track<T extends { dispose(): void }>(x: T): T {
    this.live.push(x);
    return x;
  }

  /** Disposes everything handed out since the last call, newest first. */
  disposeAll(): void {
    for (const t of this.live.splice(0).reverse()) t.dispose();
  }
}

/** Per-frame Euler step on channels-first [1, C, F, h, w]: x[:, :, f] += (σ_next,f − σ_f) · v[:, :, f]. */
export function eulerFrames(x: Float32Array, v: ArrayLike<number>, shape: number[], sig: number[], sigNext: number[]): void {
  const [, C, F, h, w] = shape;
  const hw = h * w;
  for (let c = 0; c < C; c++)
    for (let f = 0; f < F; f++) {
      const d = sigNext[f] - sig[f];
      const o = (c * F + f) * hw;
      for (let i = 0; i < hw; i++) x[o + i] = x[o + i] + d * v[o + i];
    }
}
