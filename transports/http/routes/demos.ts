import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../../shared/errors';

/** Default folder of the demo pages: `demos/` at the package root (from transports/ under ts-jest, or dist/transports/). */
export function defaultDemosDir(): string {
  let dir = path.resolve(__dirname, '..', '..', '..');
  if (path.basename(dir) === 'dist') dir = path.dirname(dir);
  return path.join(dir, 'demos');
}

/** A demo file name: one path segment of lower-case letters, digits and dashes, then `.html` or `.js`. */
const DEMO_FILE = /^[a-z0-9][a-z0-9-]{0,63}\.(html|js)$/;

const CONTENT_TYPES = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8' } as const;

/**
 * Serves the demo pages of `dir`: `GET /demos/NAME` answers `demos/NAME.html` (e.g. `/demos/generate`,
 * `/demos/world`) and `GET /demos/NAME.html|.js` the file itself (the pages' ES modules). Names are checked
 * against one flat pattern before any file is touched, so no path can leave the folder; anything else is 404.
 * The pages are open (no bearer token): the WebSocket they open carries the token as `?token=`.
 */
export function registerDemoRoutes(app: FastifyInstance, dir: string = defaultDemosDir()): void {
  app.get<{ Params: { name: string } }>('/demos/:name', async (req, reply) => {
    const name = req.params.name;
    const file = DEMO_FILE.test(name) ? name : `${name}.html`;
    if (!DEMO_FILE.test(file)) throw HttpError.of('not_found', `no demo '${name.slice(0, 64)}'`);
    let body: Buffer;
    try {
      body = await readFile(path.join(dir, file));
    } catch {
      throw HttpError.of('not_found', `no demo '${name.slice(0, 64)}'`);
    }
    const ext = file.endsWith('.js') ? 'js' : 'html';
    return reply.type(CONTENT_TYPES[ext]).header('cache-control', 'no-store').send(body);
  });
}
