import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { OmniError } from '../../errors';
import { resolveModelFile, type ModelFile } from '../../models/weights/model-file';
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
 * Reads and parses a JSON file of a model folder (`model.json`, `tokenizer.json`). Messages name the file by its
 * label and give the parser's position only: neither the server's path nor the file's text reaches a client.
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file when it cannot be read (the errno code) or is not JSON.
 */
export async function readJsonFile(file: ModelFile): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file.path, 'utf8');
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file.label}: ${(e as NodeJS.ErrnoException).code ?? 'cannot be read'}`, { cause: e });
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    const position = /at position (\d+)/.exec((e as Error).message);
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file.label}: not valid JSON${position ? ` (at character ${position[1]})` : ''}`, { cause: e });
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
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `the models folder cannot be read: ${(e as NodeJS.ErrnoException).code ?? 'unknown error'}`, {
        param: 'model',
        cause: e,
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
          new OmniError('OMNIRX_ERR_UNKNOWN_MODEL', 'the models folder does not exist (OMNIRX_MODELS_DIR or --models-dir names it)', {
            param: 'modelsDir',
          }),
        );
      }
      if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.') || !existsSync(path.join(dir, 'model.json'))) {
        const known = this.list();
        return Promise.reject(
          new OmniError(
            'OMNIRX_ERR_UNKNOWN_MODEL',
            `unknown model '${name}'; available: ${known.length ? known.join(', ') : 'none in the models folder (the package ships models/omnirx-default; OMNIRX_MODELS_DIR or --models-dir points elsewhere)'}`,
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
    const file = await resolveModelFile(dir, 'model.json', id);
    const json = await readJsonFile(file);
    const familyName = (json as { family?: unknown } | null)?.family;
    if (typeof familyName !== 'string')
      throw new OmniError(
        'OMNIRX_ERR_MODEL_LOAD',
        `${file.label}: family: expected the name of a model family (registered: ${this.families.names().join(', ')})`,
      );
    const family = this.families.get(familyName, file.label);
    const spec = family.parseSpec(json, file.label);
    if (spec.id !== id) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file.label}: id: '${spec.id}' differs from its directory name '${id}'`);
    return { id, dir, spec, family };
  }
}
