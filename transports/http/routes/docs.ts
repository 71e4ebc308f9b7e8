import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../../shared/context';
import { DOCS_PAGE_HEADERS, renderDocsPage } from '../docs-page';
import { buildOpenApi } from '../openapi';

/**
 * Registers the open API docs: `GET /openapi.json` (the server's OpenAPI 3.1 document, transports/http/openapi.ts)
 * and `GET /docs` (that document as a self-contained page). Both are built on the first request, once every transport
 * has routed its WebSocket endpoints, and then served from memory.
 */
export function registerDocsRoutes(app: FastifyInstance, ctx: ServerContext, opts: { bearerAuth: boolean }): void {
  let built: { json: string; html: string } | undefined;
  const docs = () => {
    if (built === undefined) {
      const doc = buildOpenApi({ bearerAuth: opts.bearerAuth, websocketPaths: ctx.websockets.paths() });
      built = { json: JSON.stringify(doc), html: renderDocsPage(doc) };
    }
    return built;
  };
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json; charset=utf-8').send(docs().json));
  app.get('/docs', async (_req, reply) => reply.headers(DOCS_PAGE_HEADERS).send(docs().html));
}
