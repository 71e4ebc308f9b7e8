import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { OmniError } from '../errors';
import type { NativeBinding } from '../native/binding';
import { WanT2VModel, type ModelLoadOptions } from '../families/wan/model';

/** Default folder of model directories: `models/` at the package root. */
export function defaultModelsDir(): string {
  const fromEnv = process.env.OMNIRX_MODELS_DIR;
  if (fromEnv) return path.resolve(fromEnv);
  // src/models → package root, both from src/ (ts-jest) and from dist/src/ (compiled).
  let dir = path.resolve(__dirname, '..', '..');
  if (path.basename(dir) === 'dist') dir = path.dirname(dir);
  return path.join(dir, 'models');
}

/**
 * The models an engine can serve: every sub-directory of `modelsDir` holding a `model.json`. Models load on first
 * use and stay loaded (components shared by reference across requests) until `dispose`.
 */
export class ModelRegistry {
  private readonly loading = new Map<string, Promise<WanT2VModel>>();

  constructor(
    private readonly native: NativeBinding,
    readonly modelsDir: string,
    readonly defaultModel: string,
    /** Components to construct for each model (those the deployed tasks need); all when undefined. */
    private readonly components?: ReadonlySet<string>,
    /** How every model loads (the DiTs' matrix-product dtype). */
    private readonly loadOptions: ModelLoadOptions = {},
  ) {
    const loadsDiT = components === undefined || components.has('transformer');
    if (loadOptions.matmulDtype === 'bfloat16' && loadsDiT && !native.stats().bf16Native) {
      process.emitWarning('matmulDtype bfloat16 on a CPU without AVX512_BF16: the bf16 products run as a float32 emulation, slower than float32 itself', { code: 'OMNIRX_BF16_EMULATED' });
    }
  }

  /** Ids of the models found on disk. */
  list(): string[] {
    if (!existsSync(this.modelsDir)) return [];
    let entries;
    try {
      entries = readdirSync(this.modelsDir, { withFileTypes: true });
    } catch (e) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `models folder ${this.modelsDir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { param: 'model' });
    }
    return entries
      .filter((d) => d.isDirectory() && existsSync(path.join(this.modelsDir, d.name, 'model.json')))
      .map((d) => d.name)
      .sort();
  }

  /**
   * The loaded model `id` (the default when undefined).
   * @throws OmniError OMNIRX_ERR_UNKNOWN_MODEL when no such directory exists (`param` = 'model').
   */
  get(id: string | undefined): Promise<WanT2VModel> {
    const name = id ?? this.defaultModel;
    let p = this.loading.get(name);
    if (p === undefined) {
      const dir = path.join(this.modelsDir, name);
      if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.') || !existsSync(path.join(dir, 'model.json'))) {
        const known = this.list();
        return Promise.reject(
          new OmniError('OMNIRX_ERR_UNKNOWN_MODEL', `unknown model '${name}'; available: ${known.length ? known.join(', ') : `none in ${this.modelsDir} (the package ships models/omnirx-default; OMNIRX_MODELS_DIR or --models-dir points elsewhere)`}`, { param: 'model' }),
        );
      }
      p = WanT2VModel.load(this.native, dir, this.components, this.loadOptions);
      this.loading.set(name, p);
      p.catch(() => this.loading.delete(name));
    }
    return p;
  }

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
