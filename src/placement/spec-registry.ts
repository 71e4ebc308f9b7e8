import { ModelRegistry } from '../models/registry';
import type { NativeBinding } from '../native/binding';

/**
 * The model lookup of a disaggregated deployment's front (and of the server process serving it): a registry that
 * constructs no component, so `get(id)` reads and validates `model.json` (the spec the front resolves requests and
 * sessions with) and opens no weights file — the process that serves HTTP holds no weights; the stages do.
 * `get` rejects with OMNIRX_ERR_UNKNOWN_MODEL (`param` "model") when `<modelsDir>/<id>/model.json` does not exist,
 * and with OMNIRX_ERR_MODEL_LOAD naming the file (and the field, as a dotted path) when it is not JSON or not a
 * valid spec.
 */
export function specOnlyRegistry(native: NativeBinding, modelsDir: string, defaultModel: string): ModelRegistry {
  return new ModelRegistry(native, modelsDir, defaultModel, new Set());
}
