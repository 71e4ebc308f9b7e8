import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { OmniError } from '../../src/errors';

/** Methods a cross-origin page may use (every route the server answers: jobs are created, read and deleted). */
export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'DELETE'] as const;
/** Request headers a cross-origin page may send beyond the safelisted ones: the bearer token and a JSON body's type. */
export const CORS_ALLOWED_HEADERS = ['Authorization', 'Content-Type'] as const;
/** How long a browser may cache a preflight answer, seconds. */
export const CORS_MAX_AGE_S = 600;

/**
 * Why `value` is not an origin as a browser sends it in `Origin` (`scheme://host[:port]`: http or https, lower-case
 * host, no default port, no path, query, fragment or credentials), or undefined when it is one. An origin must be
 * written exactly as the browser sends it, because the allow-list is compared byte for byte.
 */
export function corsOriginProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return `must be a string, got ${value === null ? 'null' : typeof value}`;
  if (value === '*') return 'the wildcard "*" is not accepted: list each origin that may call the server';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${JSON.stringify(value.slice(0, 100))} is not an origin: expected scheme://host[:port], e.g. "https://app.example.com"`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${JSON.stringify(value.slice(0, 100))} is not an http or https origin`;
  if (url.origin !== value) {
    return `${JSON.stringify(value.slice(0, 100))} is not an origin as a browser sends it: write ${JSON.stringify(url.origin)} (no path, no trailing slash, lower-case host, no default port)`;
  }
  return undefined;
}

/**
 * Checks `createServer`'s `corsOrigins`: an array of origins (see {@link corsOriginProblem}). An empty array or
 * undefined turns CORS off.
 * @returns the allowed origins, without duplicates.
 * @throws OmniError OMNIRX_ERR_CONFIG, `param` "corsOrigins", naming the entry that is not an origin.
 */
export function parseCorsOrigins(value: unknown): readonly string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new OmniError('OMNIRX_ERR_CONFIG', 'corsOrigins must be an array of origins, e.g. ["https://app.example.com"]', { param: 'corsOrigins' });
  value.forEach((o: unknown, i) => {
    const problem = corsOriginProblem(o);
    if (problem !== undefined) throw new OmniError('OMNIRX_ERR_CONFIG', `corsOrigins[${i}] ${problem}`, { param: 'corsOrigins' });
  });
  return [...new Set(value as string[])];
}

/**
 * Turns on CORS for `origins` (exact matches; none given: nothing is registered, so no response carries an
 * `Access-Control-*` header). Registered on the root instance before the bearer-token hook: a preflight
 * (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an allowed origin is answered 204 with
 * {@link CORS_METHODS}, {@link CORS_ALLOWED_HEADERS} and a max age before auth runs (browsers send no
 * `Authorization` on a preflight); every other response to an allowed origin carries `Access-Control-Allow-Origin`
 * (errors included, so the page can read them). A request from any other origin gets no CORS header (the browser
 * then refuses the page the answer), and its preflight is answered as without CORS: 404 `not_found` (the bearer-token
 * hook lets OPTIONS through, since a preflight never carries a token). No credentials (cookies)
 * are allowed: the server authenticates with a bearer token only.
 */
export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return;
  const allowed = new Set(origins);
  await app.register(cors, {
    origin: (origin, done) => done(null, origin !== undefined && allowed.has(origin) ? origin : false),
    methods: [...CORS_METHODS],
    allowedHeaders: [...CORS_ALLOWED_HEADERS],
    // The page may read the request id every response carries, to quote it.
    exposedHeaders: ['X-Request-Id'],
    maxAge: CORS_MAX_AGE_S,
    credentials: false,
    // An OPTIONS from an allowed origin without Access-Control-Request-Method gets the CORS headers rather than the
    // plugin's text/plain 400, which is not the server's error shape.
    strictPreflight: false,
  });
}
