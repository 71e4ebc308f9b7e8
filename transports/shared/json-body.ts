import { HttpError } from './errors';

/** Keys refused anywhere in a JSON body: merging them into an object can change its prototype (prototype pollution). */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Parses a JSON request body (the server's `application/json` parser; Fastify's own reports every failure as one
 * generic "not valid JSON" message).
 * @param text the body as received (UTF-8 decoded), at most the server's body limit.
 * @returns the parsed value (the routes' schemas check its shape).
 * @throws HttpError `invalid_json` (400) for an empty body or malformed JSON, with the parser's message, which gives
 *   the character position of the fault; `invalid_body` (400) naming the dotted path of a `__proto__`, `constructor`
 *   or `prototype` key at any depth (e.g. `param: "size.__proto__"`), refused rather than dropped.
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim().length === 0) throw HttpError.of('invalid_json', 'the body is empty: send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw HttpError.of('invalid_json', `the body is not valid JSON: ${(e as Error).message}`);
  }
  const bad = forbiddenKeyPath(value);
  if (bad !== undefined) throw HttpError.of('invalid_body', `${bad}: the key "${bad.split('.').pop()}" is not allowed in a request body`, bad);
  return value;
}

/** A key on the way down to a value: a linked list up to the root, so deep bodies cost no path copies. */
interface PathNode {
  key: string;
  parent: PathNode | undefined;
}

function joinPath(node: PathNode): string {
  const keys: string[] = [];
  for (let n: PathNode | undefined = node; n !== undefined; n = n.parent) keys.push(n.key);
  return keys.reverse().join('.');
}

/** Dotted path of the first forbidden key in `value` (depth first, arrays by index), or undefined. */
function forbiddenKeyPath(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  // An explicit stack, not recursion: a body nested 100k levels deep must not overflow the call stack.
  const stack: Array<{ v: object; at: PathNode | undefined }> = [{ v: value, at: undefined }];
  while (stack.length > 0) {
    const { v, at } = stack.pop()!;
    for (const key of Object.keys(v)) {
      const node = { key, parent: at };
      if (FORBIDDEN_KEYS.has(key)) return joinPath(node);
      const child = (v as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) stack.push({ v: child, at: node });
    }
  }
  return undefined;
}
