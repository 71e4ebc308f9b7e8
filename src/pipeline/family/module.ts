import { OmniError } from '../../errors';
import type { ModelFamily } from './family';

/**
 * Loads the family a module exports as `family` (how a stage process, or a deploy config's `families` list, gets a
 * family it cannot import by name). `specifier` is what `require` resolves: an absolute path or a package subpath.
 * @throws OmniError OMNIRX_ERR_CONFIG when the module cannot be loaded or exports no family (`name`, `parseSpec`,
 *   `load`, `pipeline`, `resolve` functions and fields).
 */
export function loadFamilyModule(specifier: string): ModelFamily {
  let mod: unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a family named by the deployment at run time
    mod = require(specifier);
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_CONFIG', `family module '${specifier}' could not be loaded: ${(e as Error).message}`, { param: 'families' });
  }
  const f = (mod as { family?: Partial<ModelFamily> } | null)?.family;
  const fns = ['parseSpec', 'load', 'pipeline', 'createState', 'resolve', 'claim', 'work'] as const;
  if (f === undefined || f === null || typeof f.name !== 'string' || fns.some((k) => typeof f[k] !== 'function')) {
    throw new OmniError(
      'OMNIRX_ERR_CONFIG',
      `family module '${specifier}' does not export a model family as \`family\` (defineFamily from 'omnirx/families')`,
      { param: 'families' },
    );
  }
  return f as ModelFamily;
}
