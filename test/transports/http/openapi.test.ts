/**
 * The API docs: `GET /openapi.json` is a structurally valid OpenAPI 3.1 document listing exactly the routes the server
 * registers (a route added without docs fails here), its schemas resolve and match the zod schemas the routes parse
 * with, real responses have the documented shapes, and `GET /docs` renders it as a self-contained page. Chromium's
 * view of the page is in cors-browser.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { createApp } from './helpers';
import {
  ErrorBodySchema,
  HealthSchema,
  ImagesResponseSchema,
  ModelListSchema,
  ModelSchema,
  ReadySchema,
  VideoDeletedSchema,
  VideoListSchema,
  VideoObjectSchema,
} from '../../../transports/http/api-schemas';
import type { VideoObject } from '../../../transports/http/jobs';
import { ImageGenerateBodySchema, VideoCreateBodySchema } from '../../../transports/shared/video-request';

type Json = Record<string, any>;
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The routes of `app.printRoutes({ commonPrefix: false })` as "METHOD /path" (Fastify's `:param` syntax), without the
 * HEAD twins of GET routes and CORS's OPTIONS catch-all. The tree prints one node a line: 4 characters of indent per
 * level, then `├── ` or `└── `, the node's path relative to its parent, and its methods in parentheses.
 */
function registeredRoutes(app: FastifyInstance): string[] {
  const stack: string[] = [];
  const out: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:[│ ] {3})*)[├└]── (\S+)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (m === null) {
      expect(line.trim()).toBe('');
      continue;
    }
    const depth = m[1]!.length / 4;
    const path = (stack[depth - 1] ?? '') + m[2]!;
    stack[depth] = path;
    stack.length = depth + 1;
    for (const method of (m[3] ?? '').split(/,\s*/).filter(Boolean)) if (method !== 'HEAD' && method !== 'OPTIONS') out.push(`${method} ${path}`);
  }
  return out.sort();
}

/** The operations of an OpenAPI document as "METHOD /path" in Fastify's syntax. */
function documentedRoutes(doc: Json): string[] {
  return Object.entries(doc.paths as Record<string, Json>)
    .flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`))
    .sort();
}

/** Resolves a local JSON pointer (`#/components/schemas/X`) in `doc`, or undefined. */
function resolve(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Json)[key] : undefined), doc);
}

/** Every `$ref` in `node`. */
function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refsIn(n, out));
  else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsIn(v, out);
    }
  }
  return out;
}

/** Structural checks of OpenAPI 3.1 (the parts this server uses); returns the problems found. */
function openApiProblems(doc: Json): string[] {
  const problems: string[] = [];
  const check = (ok: boolean, what: string) => void (ok || problems.push(what));
  check(typeof doc.openapi === 'string' && /^3\.1\.\d+$/.test(doc.openapi), 'openapi is 3.1.x');
  check(typeof doc.info?.title === 'string' && typeof doc.info?.version === 'string', 'info has title and version');
  check(doc.paths !== null && typeof doc.paths === 'object', 'paths is an object');
  const operationIds = new Set<string>();
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
    check(path.startsWith('/'), `${path} starts with /`);
    const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      check(HTTP_METHODS.includes(method), `${where}: a method`);
      check(typeof op.summary === 'string' && op.summary.length > 0, `${where}: has a summary`);
      check(typeof op.operationId === 'string' && !operationIds.has(op.operationId), `${where}: unique operationId`);
      operationIds.add(op.operationId);
      const params = (op.parameters ?? []) as Json[];
      for (const p of params) {
        check(
          typeof p.name === 'string' && ['path', 'query', 'header', 'cookie'].includes(p.in) && p.schema !== undefined,
          `${where}: parameter ${p.name} well formed`,
        );
        if (p.in === 'path') check(p.required === true && templated.includes(p.name), `${where}: path parameter ${p.name} is required and in the path`);
      }
      for (const t of templated)
        check(
          params.some((p) => p.in === 'path' && p.name === t),
          `${where}: {${t}} declared`,
        );
      if (op.requestBody !== undefined) check(Object.keys(op.requestBody.content ?? {}).length > 0, `${where}: request body has content`);
      const responses = Object.entries((op.responses ?? {}) as Record<string, Json>);
      check(
        responses.some(([s]) => /^(2\d\d|101)$/.test(s)),
        `${where}: a success response`,
      );
      for (const [status, r] of responses) {
        check(/^([1-5]\d\d|default)$/.test(status), `${where}: status ${status}`);
        check(typeof r.$ref === 'string' || typeof r.description === 'string', `${where} ${status}: a description or a $ref`);
      }
      check(Array.isArray(op.security), `${where}: security stated`);
      for (const req of (op.security ?? []) as Json[])
        for (const scheme of Object.keys(req)) check(doc.components?.securitySchemes?.[scheme] !== undefined, `${where}: security scheme ${scheme} defined`);
    }
  }
  for (const [name, r] of Object.entries((doc.components?.responses ?? {}) as Record<string, Json>))
    check(typeof r.description === 'string', `response ${name} has a description`);
  for (const ref of refsIn(doc)) check(resolve(doc, ref) !== undefined, `$ref ${ref} resolves`);
  return problems;
}

describe('GET /openapi.json', () => {
  let app: FastifyInstance;
  let doc: Json;
  beforeAll(async () => {
    app = await createApp();
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    doc = res.json();
  });
  afterAll(async () => {
    await app.close();
  });

  it('is structurally valid OpenAPI 3.1: operations well formed, path parameters declared, every $ref resolves', () => {
    expect(openApiProblems(doc)).toEqual([]);
    expect(doc.info).toMatchObject({ title: 'omnirx', version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('documents exactly the routes the server registers (HTTP and WebSocket): a route without docs fails here', () => {
    const http = registeredRoutes(app);
    expect(http).toEqual(expect.arrayContaining(['GET /health', 'POST /v1/videos', 'GET /v1/videos/:id', 'DELETE /v1/videos/:id']));
    const ws = app.omnirx.websockets.paths().map((p) => `GET ${p}`);
    expect(ws).toEqual(['GET /v1/rtc', 'GET /v1/stream'].filter((w) => ws.includes(w)));
    expect(ws).toHaveLength(2);
    expect(documentedRoutes(doc)).toEqual([...http, ...ws].sort());
  });

  it('request bodies are the zod schemas the routes parse with, every field described', () => {
    const schemas = doc.components.schemas as Record<string, Json>;
    for (const [name, zod] of [
      ['VideoCreateBody', VideoCreateBodySchema],
      ['VideoCreateForm', VideoCreateBodySchema],
      ['ImageGenerateBody', ImageGenerateBodySchema],
    ] as const) {
      const s = schemas[name]!;
      expect({ name, fields: Object.keys(s.properties).sort() }).toEqual({ name, fields: Object.keys(zod.shape).sort() });
      expect(s.required).toEqual(['prompt']);
      expect(s.additionalProperties).toBe(false);
      for (const [field, p] of Object.entries(s.properties as Record<string, Json>))
        expect({ name, field, d: typeof p.description }).toEqual({ name, field, d: 'string' });
    }
    expect(schemas.VideoCreateBody!.properties.size).toMatchObject({ type: 'string', pattern: expect.any(String) });
    expect(schemas.VideoCreateBody!.properties.eta).toMatchObject({ type: 'number', minimum: 0, maximum: 1 });
    expect(schemas.VideoCreateForm!.properties.input_reference).toMatchObject({ type: 'string', format: 'binary' });
    const post = doc.paths['/v1/videos'].post;
    expect(Object.keys(post.requestBody.content)).toEqual(['application/json', 'multipart/form-data']);
    const list = doc.paths['/v1/videos'].get;
    expect(list.parameters.map((p: Json) => [p.name, p.in])).toEqual([
      ['limit', 'query'],
      ['after', 'query'],
      ['order', 'query'],
    ]);
    for (const p of list.parameters) expect(p.description).toEqual(expect.any(String));
  });

  it('responses name their shapes, errors the error body; without an api key there is no security scheme', () => {
    const ops = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.entries(item).map(([m, op]) => ({ where: `${m} ${path}`, op })),
    );
    for (const { where, op } of ops) {
      expect({ where, security: op.security }).toEqual({ where, security: [] });
      expect({ where, default: op.responses.default }).toEqual({ where, default: { $ref: '#/components/responses/Error' } });
    }
    expect(doc.paths['/v1/videos/{id}'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/VideoObject' });
    expect(doc.paths['/v1/videos/{id}'].get.responses['404']).toEqual({ $ref: '#/components/responses/NotFound' });
    expect(doc.components.responses.NotFound.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(doc.components.schemas.Error).toMatchObject({
      properties: { error: { required: ['type', 'message', 'param', 'code'] } },
    });
    expect(doc.components.securitySchemes).toBeUndefined();
    expect(doc.paths['/v1/videos'].post.responses['401']).toBeUndefined();
  });

  it('real responses have the documented shapes', async () => {
    const get = async (url: string) => (await app.inject({ method: 'GET', url })).json();
    const post = async (url: string, body: unknown) =>
      app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const created = await post('/v1/videos', { prompt: 'a red ball', size: '64x64', num_frames: 1, num_inference_steps: 1 });
    expect(created.statusCode).toBe(200);
    const job = VideoObjectSchema.parse(created.json());
    // and the TypeScript type of the job object is the schema's
    const typed: z.infer<typeof VideoObjectSchema> = job as VideoObject;
    expect(typed.id).toBe(job.id);
    VideoListSchema.parse(await get('/v1/videos'));
    ModelListSchema.parse(await get('/v1/models'));
    ModelSchema.parse(await get('/v1/models/tiny'));
    HealthSchema.parse(await get('/health'));
    ReadySchema.parse(await get('/ready'));
    const image = await post('/v1/images/generations', { prompt: 'a red ball', size: '64x64', num_inference_steps: 1 });
    expect(image.statusCode).toBe(200);
    ImagesResponseSchema.parse(image.json());
    for (const res of [await post('/v1/videos', { prompt: 'x', sizes: 1 }), await app.inject({ method: 'GET', url: '/v1/videos/video_nope' })])
      ErrorBodySchema.parse(res.json());
    VideoDeletedSchema.parse((await app.inject({ method: 'DELETE', url: `/v1/videos/${job.id}` })).json());
  });
});

describe('with an api key', () => {
  let app: FastifyInstance;
  let doc: Json;
  beforeAll(async () => {
    app = await createApp({ apiKey: 'k' });
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json();
  });
  afterAll(async () => {
    await app.close();
  });

  it('documents the bearer scheme on /v1 (with its 401) and the open routes as open; the docs need no token', async () => {
    expect(openApiProblems(doc)).toEqual([]);
    expect(doc.components.securitySchemes).toEqual({ bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>))
      for (const [m, op] of Object.entries(item)) {
        const secured = path.startsWith('/v1');
        expect({ where: `${m} ${path}`, security: op.security, has401: op.responses['401'] !== undefined }).toEqual({
          where: `${m} ${path}`,
          security: secured ? [{ bearerAuth: [] }] : [],
          has401: secured,
        });
      }
    expect((await app.inject({ method: 'GET', url: '/docs' })).statusCode).toBe(200);
  });
});

describe('GET /docs', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createApp({ apiKey: 'k' });
  });
  afterAll(async () => {
    await app.close();
  });

  it('is one self-contained HTML page naming every route and schema, with a CSP that forbids loading anything', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toMatch(/default-src 'none'/);
    const html = res.body;
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Json;
    for (const path of Object.keys(doc.paths)) expect(html).toContain(`<code class="path">${path}</code>`);
    for (const name of Object.keys(doc.components.schemas)) expect(html).toContain(`id="schema-${name}"`);
    expect(html).toContain('bearer token');
    // nothing to fetch: no script, no stylesheet link, no image, no absolute URL
    expect(html).not.toMatch(/<script|<link|<img|https?:\/\//);
  });
});
