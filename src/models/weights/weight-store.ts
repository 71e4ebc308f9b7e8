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
 * store (disposed with it). Every lookup checks the name and shape against the model's parameter list, so a
 * checkpoint of another architecture fails with the tensor's name instead of producing garbage.
 */
export class WeightStore {
  private readonly loaded = new Map<string, NativeTensor>();

  private constructor(
    private readonly native: NativeBinding,
    private readonly file: SafetensorsFile,
    readonly source: string,
  ) {}

  /**
   * Opens `path` and checks that it holds every parameter in `params` with the right number of elements.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the first missing or mis-shaped tensor; SafetensorsError for a
   *   malformed file.
   */
  static async open(native: NativeBinding, path: string, params: readonly ParamSpec[]): Promise<WeightStore> {
    const file = await readSafetensors(path).catch((e: NodeJS.ErrnoException) => {
      if (typeof e.code === 'string' && !e.code.startsWith('OMNIRX_')) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${path}: ${e.code === 'ENOENT' ? 'missing file' : e.code}`, { cause: e });
      throw e;
    });
    for (const p of params) {
      const entry = file.entries.find((e) => e.name === p.name);
      if (entry === undefined) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${path}: missing tensor "${p.name}" [${p.shape.join(', ')}]`);
      const want = p.shape.reduce((a, b) => a * b, 1);
      const have = entry.shape.reduce((a, b) => a * b, 1);
      if (want !== have) {
        throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${path}: tensor "${p.name}" has shape [${entry.shape.join(', ')}], the model expects [${p.shape.join(', ')}]`);
      }
    }
    return new WeightStore(native, file, path);
  }

  /** The tensor `name` as a native float32 tensor of `shape` (loaded once, then shared). */
  get(name: string, shape: readonly number[]): NativeTensor {
    let t = this.loaded.get(name);
    if (t === undefined) {
      if (!this.file.has(name)) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${this.source}: missing tensor "${name}"`);
      t = createTensor(this.native, shape, this.file.float32(name));
      this.loaded.set(name, t);
    } else if (t.numel !== shape.reduce((a, b) => a * b, 1)) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${this.source}: tensor "${name}" requested with two different sizes`);
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
