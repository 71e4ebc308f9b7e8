import * as path from 'node:path';
import { OmniError } from '../errors';

/** A float32 tensor in native memory. `data` is a zero-copy view; it becomes unusable after `dispose()`. */
export interface NativeTensor {
  /** Zero-copy view of the tensor's elements (row-major). Throws once the tensor is disposed. */
  readonly data: Float32Array;
  readonly shape: number[];
  readonly numel: number;
  readonly disposed: boolean;
  /** Frees the native memory now (or when the last running plan using it finishes). Idempotent. */
  dispose(): void;
}

/** Where a plan value lives: 0 = the plan's arena, 1 = a constant tensor, 2 = a per-run slot. */
export interface PlanValueSpec {
  kind: 0 | 1 | 2;
  index: number;
  /** Offset in float32 elements. */
  offset: number;
  shape: number[];
}

export interface PlanOpSpec {
  op: string;
  label?: string;
  /** Value indices; -1 for an absent optional operand. */
  inputs: number[];
  outputs: number[];
  attrs?: Record<string, number | number[]>;
}

/** The plain object that crosses into the addon when a plan is compiled. */
export interface PlanSpec {
  arenaFloats: number;
  consts: NativeTensor[];
  slots: number[][];
  values: PlanValueSpec[];
  ops: PlanOpSpec[];
}

export interface NativePlan {
  /** Runs ops [from, to) on the executor thread with `bindings` for the slots, in slot order. */
  run(bindings: NativeTensor[], from?: number, to?: number): Promise<void>;
  dispose(): void;
  readonly numOps: number;
  /** Bytes of the arena allocated for intermediates. */
  readonly arenaBytes: number;
}

export interface NativeStats {
  /** Bytes of native memory held by tensors, packed weights, plan arenas and op scratch. */
  bytesInUse: number;
  buffers: number;
  /** Bytes of per-thread kernel scratch (grows to the largest shape each pool thread has run, then stays). */
  scratchBytes: number;
  queued: number;
  running: number;
  completed: number;
  threads: number;
  /**
   * Whether `matmulDtype: 'bfloat16'` runs on the CPU's bf16 dot-product instruction (AVX512_BF16); when false it
   * runs a plain float32 emulation with the same results, slower than float32 itself.
   */
  bf16Native: boolean;
}

/** Result of `bf16Check()`: output elements compared and how many differ in any bit. */
export interface Bf16CheckResult {
  /** Whether this build has the AVX512_BF16 form of the bf16 micro-kernel (as `NativeStats.bf16Native`). */
  native: boolean;
  compared: number;
  mismatches: number;
}

export interface NativeBinding {
  Tensor: new (shape: number[]) => NativeTensor;
  Plan: new (spec: PlanSpec) => NativePlan;
  stats(): NativeStats;
  /**
   * Runs the bf16 micro-kernel's instruction form and its float32 emulation (what CPUs without AVX512_BF16 run) on
   * the same fixed operands (|x| 2⁻²⁰…2²⁰, no denormals; K 2…384; with and without accumulation into C) and compares
   * the results bit for bit. `compared` is 0 in a build without the instruction (only the emulation exists). Runs
   * synchronously on the calling thread (about 1 ms).
   */
  bf16Check(): Bf16CheckResult;
}

/**
 * Loads the compiled addon (`native/build/Release`, then `native/build/Debug`). Node's module cache makes repeated
 * calls free. Throws OmniError('OMNIRX_ERR_NATIVE') listing every path tried and why it failed.
 */
export function loadNative(): NativeBinding {
  const root = path.resolve(__dirname, '..', '..', '..');
  const candidates = [
    path.join(root, 'native', 'build', 'Release', 'omnirx_native.node'),
    path.join(root, 'native', 'build', 'Debug', 'omnirx_native.node'),
    path.resolve(__dirname, '..', '..', 'native', 'build', 'Release', 'omnirx_native.node'),
  ];
  const failures: string[] = [];
  for (const candidate of candidates) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return require(candidate) as NativeBinding;
    } catch (e) {
      failures.push(`${candidate}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  throw new OmniError('OMNIRX_ERR_NATIVE', `the omnirx native addon is not built (run npm ci or npm run install).\n  ${failures.join('\n  ')}`);
}

/** Allocates a native tensor of `shape`, optionally filled from `data` (length must match). */
export function createTensor(native: NativeBinding, shape: readonly number[], data?: ArrayLike<number>): NativeTensor {
  const t = new native.Tensor([...shape]);
  if (data !== undefined) {
    if (data.length !== t.numel) {
      t.dispose();
      throw new OmniError('OMNIRX_ERR_NATIVE', `createTensor: ${data.length} values given for shape [${shape.join(', ')}] (${t.numel} elements)`);
    }
    t.data.set(data);
  }
  return t;
}
