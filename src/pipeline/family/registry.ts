import { OmniError } from '../../errors';
import type { ModelFamily } from './family';

/**
 * The model families a deployment knows, keyed by `model.json`'s `family` (docs/design.md §7). The engine, executors
 * and placement resolve a model's family here and never name one; the package root registers the built-in families
 * (`builtinFamilies()` from `omnirx/families`) and a user adds their own beside them.
 */
export class FamilyRegistry {
  private readonly byName = new Map<string, ModelFamily>();

  /**
   * @throws OmniError OMNIRX_ERR_CONFIG (`param` "families") when `families` is not an iterable of families (a caller
   *   from plain JavaScript that left it out), or when two families share a name.
   */
  constructor(families: Iterable<ModelFamily>) {
    const iterable = typeof (families as { [Symbol.iterator]?: unknown } | null | undefined)?.[Symbol.iterator] === 'function';
    if (!iterable)
      throw new OmniError('OMNIRX_ERR_CONFIG', "families must list the model families to serve, e.g. builtinFamilies() from 'omnirx'", { param: 'families' });
    for (const f of families) {
      if (typeof (f as { name?: unknown } | null)?.name !== 'string') {
        throw new OmniError('OMNIRX_ERR_CONFIG', 'every entry of families must be a model family (defineFamily(...))', { param: 'families' });
      }
      if (this.byName.has(f.name)) throw new OmniError('OMNIRX_ERR_CONFIG', `two model families are named '${f.name}'`, { param: 'families' });
      this.byName.set(f.name, f);
    }
  }

  /** Names of the registered families, sorted. */
  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  list(): ModelFamily[] {
    return [...this.byName.values()];
  }

  /** The family `name`, or undefined. */
  find(name: string): ModelFamily | undefined {
    return this.byName.get(name);
  }

  /**
   * The family `name`.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming `source` (the model.json that asked for it) and the registered names.
   */
  get(name: string, source: string): ModelFamily {
    const f = this.byName.get(name);
    if (f === undefined)
      throw new OmniError(
        'OMNIRX_ERR_MODEL_LOAD',
        `${source}: family: '${name}' is not a registered model family (registered: ${this.names().join(', ') || 'none'})`,
      );
    return f;
  }
}
