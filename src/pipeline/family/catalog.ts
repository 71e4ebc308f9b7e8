import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { OmniError } from '../../errors';
import type { ModelFamily } from './family';
import type { ModelSpecBase } from './model-spec';
import type { FamilyRegistry } from './registry';

/** Default folder of model directories: `$OMNIRX_MODELS_DIR`, else `models/` at the package root. */
export function defaultModelsDir(): string {
  const fromEnv = process.env.OMNIRX_MODELS_DIR;
  if (fromEnv) return path.resolve(fromEnv);
  // src/pipeline/family → package root, both from src/ (ts-jest) and from dist/src/ (compiled).
  let dir = path.resolve(__dirname, '..', '..', '..');
  if (path.basename(dir) === 'dist') dir = path.dirname(dir);
  return path.join(dir, 'models');
}

/** One model of the catalogue: its directory, validated spec and family. */
export interface CatalogEntry {
  readonly id: string;
  readonly dir: string;
  readonly spec: ModelSpecBase;
  readonly family: ModelFamily;
}

/**
 * Reads and parses a JSON file of a model directory.
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file when it cannot be read or is not JSON (with the parser's position).
 */
export async function readJsonFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: not valid JSON (${(e as Error).message})`);
  }
}

/**
 * The models a deployment can serve: every sub-directory of `modelsDir` holding a `model.json`, read by the family its
 * `family` field names. Reading a spec opens no weights file: the front resolves requests with specs alone, and only
 * an executor loads weights (`ModelLoader`). A spec read once is kept; a failed read is retried next time.
 */
export class ModelCatalog {
  private readonly entries = new Map<string, Promise<CatalogEntry>>();

  constructor(
    readonly modelsDir: string,
    readonly defaultModel: string,
    readonly families: FamilyRegistry,
  ) {}

  /**
   * Ids of the models found on disk, sorted.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD when the folder exists but cannot be read.
   */
  list(): string[] {
    if (!existsSync(this.modelsDir)) return [];
    let entries;
    try {
      entries = readdirSync(this.modelsDir, { withFileTypes: true });
    } catch (e) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `models folder ${this.modelsDir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
        param: 'model',
      });
    }
    return (
      entries
        // a symlink counts where it reaches a folder holding model.json (existsSync follows it), as get() loads it
        .filter((d) => (d.isDirectory() || d.isSymbolicLink()) && existsSync(path.join(this.modelsDir, d.name, 'model.json')))
        .map((d) => d.name)
        .sort()
    );
  }

  /**
   * Model `id` (the default model when undefined): its directory, spec and family.
   * @throws OmniError OMNIRX_ERR_UNKNOWN_MODEL (`param` "modelsDir") when the models folder does not exist, (`param`
   *   "model") when no such model directory exists in it; OMNIRX_ERR_MODEL_LOAD
   *   naming the file (and the field) when `model.json` is not JSON, names an unregistered family or fails its schema.
   */
  get(id: string | undefined): Promise<CatalogEntry> {
    const name = id ?? this.defaultModel;
    let p = this.entries.get(name);
    if (p === undefined) {
      const dir = path.join(this.modelsDir, name);
      if (!existsSync(this.modelsDir)) {
        return Promise.reject(
          new OmniError('OMNIRX_ERR_UNKNOWN_MODEL', `the models folder ${this.modelsDir} does not exist (OMNIRX_MODELS_DIR or --models-dir names it)`, {
            param: 'modelsDir',
          }),
        );
      }
      if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.') || !existsSync(path.join(dir, 'model.json'))) {
        const known = this.list();
        return Promise.reject(
          new OmniError(
            'OMNIRX_ERR_UNKNOWN_MODEL',
            `unknown model '${name}'; available: ${known.length ? known.join(', ') : `none in ${this.modelsDir} (the package ships models/omnirx-default; OMNIRX_MODELS_DIR or --models-dir points elsewhere)`}`,
            { param: 'model' },
          ),
        );
      }
      p = this.read(name, dir);
      this.entries.set(name, p);
      p.catch(() => this.entries.delete(name));
    }
    return p;
  }

  private async read(id: string, dir: string): Promise<CatalogEntry> {
    const file = path.join(dir, 'model.json');
    const json = await readJsonFile(file);
    const familyName = (json as { family?: unknown } | null)?.family;
    if (typeof familyName !== 'string')
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: family: expected the name of a model family (registered: ${this.families.names().join(', ')})`);
    const family = this.families.get(familyName, file);
    const spec = family.parseSpec(json, file);
    if (spec.id !== id) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: id: '${spec.id}' differs from its directory name '${id}'`);
    return { id, dir, spec, family };
  }
}
