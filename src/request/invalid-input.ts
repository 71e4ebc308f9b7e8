import type { z } from 'zod';
import { OmniError } from '../errors';

/**
 * The first issue of a failed parse as an OmniError OMNIRX_ERR_INVALID_REQUEST whose `param` is the field's dotted
 * path (prefixed by `prefix`, e.g. `action.key`); `(root)` when the input itself is wrong.
 */
export function invalidInput(error: z.ZodError, prefix?: string): OmniError {
  const issue = error.issues[0];
  const field = [...(prefix === undefined ? [] : [prefix]), ...issue.path.map(String)].join('.');
  return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `${field || '(root)'}: ${issue.message}`, { param: field || undefined });
}
