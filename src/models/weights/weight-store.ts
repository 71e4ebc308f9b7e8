import { OmniError } from '../../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../../native/binding';
import { readSafetensors, type SafetensorsFile } from './safetensors';

/** A parameter a model expects: its upstream name, shape, and how the seeded generator initialises it. */
export interface ParamSpec {
  name: string;
  shape: number[];
  init: 'normal' | 'zeros' | 'ones';
  /** Standard deviation for 'normal'. */
  std?: number;
}

/**
 * The weights of one component, loaded from a safetensors file into native tensors on demand and owned by the
 * store (disposed with it). Opening checks every parameter the model expects against the file — present, of a
 * float dtype, of exactly the expected shape, every value finite — so a checkpoint of another architecture, or a
 * corrupted one, fails at load with the tensor's name instead of producing garbage.
 */
export class WeightStore {
  private readonly loaded = new Map<string, NativeTensor>();

  private constructor(
    private readonly native: NativeBinding,
    private readonly file: SafetensorsFile,
    readonly source: string,
  ) {}

  /**
   * Opens the safetensors file `path` and checks each parameter of `params` in it: the tensor is present, its dtype
   * is F32, F16 or BF16 (widened to float32 when loaded), its shape equals `ParamSpec.shape` dimension by dimension
   * (the same element count in another layout is refused), and none of its values is NaN or ±Infinity (one pass over
   * each tensor's bits, before any is loaded).
   * @param source how messages name the file (default `path`); model loaders pass a `ModelFile` label, as their
   *   errors reach clients
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming `source` and the first tensor that is missing, of another dtype,
   *   of another shape or holds a non-finite value (with the element's index), or the file-system error's code;
   *   SafetensorsError (prefixed with `source`) for a malformed file.
   */
  static async open(native: NativeBinding, path: string, params: readonly ParamSpec[], source = path): Promise<WeightStore> {
    const file = await readSafetensors(path, source).catch((e: NodeJS.ErrnoException) => {
      if (typeof e.code === 'string' && !e.code.startsWith('OMNIRX_')) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${source}: ${e.code === 'ENOENT' ? 'missing file' : e.code}`, { cause: e });
      throw e;
    });
    const refused = (message: string) => new OmniError('OMNIRX_ERR_MODEL_LOAD', `${source}: ${message}`);
    const shapes = new Map(file.entries.map((e) => [e.name, e.shape]));
    for (const p of params) {
      const shape = shapes.get(p.name);
      if (shape === undefined) {
        const dtype = file.dtypeOf(p.name);
        if (dtype !== undefined) throw refused(`tensor '${p.name}' has dtype ${dtype}; expected F32, F16 or BF16`);
        throw refused(`missing tensor '${p.name}' [${p.shape.join(', ')}]`);
      }
      if (shape.length !== p.shape.length || shape.some((d, i) => d !== p.shape[i])) {
        throw refused(`tensor '${p.name}' has shape [${shape.join(', ')}]; expected [${p.shape.join(', ')}]`);
      }
      const bad = file.findNonFinite(p.name);
      if (bad !== undefined) throw refused(`tensor '${p.name}' has non-finite values (first at element ${bad.index}: ${bad.value})`);
      // The scan runs on the event loop (~2 ns per element): between large tensors, let timers and IPC (a stage
      // process's liveness pings) through, so a multi-GB checkpoint does not hold the loop for seconds.
      if (p.shape.reduce((a, b) => a * b, 1) >= 1 << 20) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return new WeightStore(native, file, source);
  }

  /**
   * The tensor `name` as a native float32 tensor of `shape` (loaded once, then shared). `shape` may regroup the
   * dimensions `open` checked (a view of the same elements); its element count must stay the same.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD when the file holds no float tensor `name`, or when `name` was loaded
   *   before with another element count.
   */
  get(name: string, shape: readonly number[]): NativeTensor {
    let t = this.loaded.get(name);
    if (t === undefined) {
      if (!this.file.has(name)) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${this.source}: missing tensor '${name}'`);
      t = createTensor(this.native, shape, this.file.float32(name));
      this.loaded.set(name, t);
    } else if (t.numel !== shape.reduce((a, b) => a * b, 1)) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${this.source}: tensor '${name}' requested with two different sizes`);
    }
    return t;
  }

  /** Native bytes held by the loaded tensors. */
  get bytes(): number {
    let n = 0;
    for (const t of this.loaded.values()) n += t.numel * 4;
    return n;
  }

  dispose(): void {
    for (const t of this.loaded.values()) t.dispose();
    this.loaded.clear();
  }
}
