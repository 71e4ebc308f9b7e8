import { realpath } from 'node:fs/promises';
import * as path from 'node:path';
import { OmniError } from '../../errors';

/**
 * A file of a model folder as the loaders open it: where it really is on this machine, and how messages name it.
 * Load errors can reach clients (HTTP bodies, WebSocket and WebRTC error messages, events), so they name the file by
 * `label` alone and never by `path`.
 */
export interface ModelFile {
  /** The file's real path, every symlink resolved: what the loader opens. */
  readonly path: string;
  /** `model '<id>': <folder>/<name>`: the model and the file's path relative to the models folder. */
  readonly label: string;
}

/**
 * Resolves file `name` (e.g. `vae.safetensors`) of the model folder `modelDir`. The file's real path (`fs.realpath`)
 * must lie inside the folder's own real path: a file may be a symlink to another file of its folder, and the folder
 * may be a symlink kept elsewhere (as the catalogue allows), but a file that resolves out of its folder (to a system
 * file, to another model, to a shared blob store) is refused, so a models folder can never make the server read a
 * file it does not hold.
 *
 * @param modelDir the model's folder, a direct child of the models folder
 * @param name     the file's name inside it
 * @param modelId  the model's id for messages (default: the folder's name, which the catalogue requires to equal it)
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming `<folder>/<name>` when the file (or the folder) does not exist or
 *   cannot be resolved (the errno code, e.g. ELOOP, EACCES), or resolves outside the folder.
 */
export async function resolveModelFile(modelDir: string, name: string, modelId = path.basename(modelDir)): Promise<ModelFile> {
  const label = `model '${modelId}': ${path.basename(modelDir)}/${name}`;
  const resolve = (p: string) =>
    realpath(p).catch((e: NodeJS.ErrnoException) => {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${label}: ${e.code === 'ENOENT' ? 'missing file' : (e.code ?? 'cannot resolve')}`, { cause: e });
    });
  const [folder, file] = await Promise.all([resolve(modelDir), resolve(path.join(modelDir, name))]);
  const relative = path.relative(folder, file);
  if (relative === '' || relative === '..' || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative)) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${label} resolves outside the model's folder (symlinked files must stay inside it)`);
  }
  return { path: file, label };
}
