import { existsSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { OmniError } from '../errors';
import { defaultModelsDir, ModelCatalog } from '../pipeline/family/catalog';
import type { ModelFamily } from '../pipeline/family/family';
import { FamilyRegistry } from '../pipeline/family/registry';
import { EXIT } from './generate';

/** What `omnirx models` needs: the families to read model.json with, and where to write. */
export interface ModelsDeps {
  /** The model families (the CLI passes the package's built-in families). */
  families: () => Promise<readonly ModelFamily[]>;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** The engine's default model id, marked in the listing. */
const DEFAULT_MODEL = 'omnirx-default';

/**
 * `omnirx models [--models-dir DIR]`: lists the models of the folder (`--models-dir`, else `$OMNIRX_MODELS_DIR`, else
 * the package's `models/`), one line each — `ID  FAMILY  TASKS`, `WORLD` among the tasks where the family runs world
 * sessions, `(default)` after the engine's default model — and a model whose `model.json` cannot be used as
 * `ID  unusable: REASON`. Reads each model.json; loads no weights.
 * @returns 0 when every model listed is usable; 1 when one is not or the folder does not exist; 2 for a bad flag.
 */
export async function runModels(argv: string[], deps: ModelsDeps): Promise<number> {
  const cmd = new Command('omnirx models')
    .description('List the models of the models folder: id, family, tasks.')
    .exitOverride()
    .configureOutput({ writeOut: (s) => void deps.stdout.write(s), writeErr: (s) => void deps.stderr.write(s) })
    .option('--models-dir <dir>', "folder of model directories (default: $OMNIRX_MODELS_DIR, else the package's models/)");
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return err.code === 'commander.helpDisplayed' ? EXIT.OK : EXIT.USAGE;
    throw err;
  }
  const dir = cmd.opts<{ modelsDir?: string }>().modelsDir ?? defaultModelsDir();
  const catalog = new ModelCatalog(dir, DEFAULT_MODEL, new FamilyRegistry(await deps.families()));
  let ids: string[];
  try {
    ids = catalog.list();
  } catch (err) {
    deps.stderr.write(`error: ${err instanceof OmniError ? `${err.code}: ` : ''}${(err as Error).message}\n`);
    return EXIT.FAILED;
  }
  if (ids.length === 0) {
    deps.stderr.write(
      existsSync(dir) ? `error: no models in ${dir} (a model is a folder holding model.json)\n` : `error: the models folder ${dir} does not exist\n`,
    );
    return EXIT.FAILED;
  }
  let code: number = EXIT.OK;
  for (const id of ids) {
    try {
      const { family } = await catalog.get(id);
      const tasks = [...family.tasks, ...(family.sessions === undefined ? [] : ['WORLD'])].join(',');
      deps.stdout.write(`${id}  ${family.name}  ${tasks}${id === DEFAULT_MODEL ? '  (default)' : ''}\n`);
    } catch (err) {
      deps.stdout.write(`${id}  unusable: ${(err as Error).message}\n`);
      code = EXIT.FAILED;
    }
  }
  return code;
}
