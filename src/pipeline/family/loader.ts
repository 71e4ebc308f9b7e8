import type { NativeBinding } from '../../native/binding';
import type { ModelCatalog } from './catalog';
import type { ModelFamily } from './family';
import type { LoadedModel, ModelLoadOptions } from './model';

/**
 * Loads the models an executor runs: a model's family constructs only the components `components(family)` names (those
 * the deployed tasks, or a stage's role, need), once; components are shared by every request until `dispose`.
 */
export class ModelLoader {
  private readonly loading = new Map<string, Promise<LoadedModel>>();

  constructor(
    private readonly native: NativeBinding,
    readonly catalog: ModelCatalog,
    private readonly components: (family: ModelFamily) => ReadonlySet<string>,
    private readonly options: ModelLoadOptions = {},
  ) {
    if (options.matmulDtype === 'bfloat16' && !native.stats().bf16Native) {
      process.emitWarning('matmulDtype bfloat16 on a CPU without AVX512_BF16: the bf16 products run as a float32 emulation, slower than float32 itself', {
        code: 'OMNIRX_BF16_EMULATED',
      });
    }
  }

  /**
   * The loaded model `id` (the catalogue's default when undefined).
   * @throws OmniError from the catalogue (OMNIRX_ERR_UNKNOWN_MODEL, OMNIRX_ERR_MODEL_LOAD) and from the family's loader.
   */
  get(id: string | undefined): Promise<LoadedModel> {
    const name = id ?? this.catalog.defaultModel;
    let p = this.loading.get(name);
    if (p === undefined) {
      p = this.catalog.get(name).then((e) => e.family.load(this.native, e.dir, e.spec, this.components(e.family), this.options));
      this.loading.set(name, p);
      p.catch(() => this.loading.delete(name));
    }
    return p;
  }

  /** The models loaded (or loading) so far. */
  loaded(): Array<Promise<LoadedModel>> {
    return [...this.loading.values()];
  }

  /** Frees every loaded model. */
  async dispose(): Promise<void> {
    const all = [...this.loading.values()];
    this.loading.clear();
    for (const p of all) {
      try {
        (await p).dispose();
      } catch {
        // a model that failed to load holds nothing
      }
    }
  }
}
