import { OmniError } from '../errors';

/**
 * Runs a native call and turns its failure into an OmniError('OMNIRX_ERR_NATIVE') whose stack points at the
 * caller (the sharp pattern: the Error is created at the call site, before the asynchronous native work).
 */
export async function callNative<T>(what: string, call: () => Promise<T>): Promise<T> {
  const site = new Error();
  try {
    return await call();
  } catch (e) {
    const err = new OmniError('OMNIRX_ERR_NATIVE', `${what}: ${(e as Error).message}`, { cause: e });
    err.stack = `${err.name}: ${err.message}\n${(site.stack ?? '').split('\n').slice(1).join('\n')}`;
    throw err;
  }
}
