import { z } from 'zod';
import { HTTP_ERROR_CODES } from '../shared/errors';
import { ImageGenerateBodySchema, VideoCreateBodySchema } from '../shared/video-request';
import { RESPONSE_SCHEMAS } from './api-schemas';
import { ContentQuerySchema, ListQuerySchema } from './routes/videos';

/**
 * The server's OpenAPI 3.1 document (`GET /openapi.json`, rendered at `GET /docs`), generated from the zod schemas the
 * routes parse with (request bodies and queries) and from transports/http/api-schemas.ts (responses), with one entry per
 * route below. A route registered without an entry here fails test/transports/http/openapi.test.ts.
 */

/** What the document depends on besides the routes. */
export interface OpenApiOptions {
  /** Whether the server requires a bearer token on `/v1` (`createServer`'s `apiKey`); adds the security scheme. */
  bearerAuth: boolean;
  /** The server's WebSocket endpoints (documented as GET upgrades). */
  websocketPaths: readonly string[];
}

type JsonSchema = Record<string, unknown>;
type Media = Record<string, { schema: JsonSchema }>;

/** One route: Fastify's path syntax (`/v1/videos/:id`), what it answers, and the error statuses it can answer. */
interface RouteDoc {
  method: 'get' | 'post' | 'delete';
  path: string;
  tag: 'videos' | 'images' | 'models' | 'operations' | 'docs' | 'demos' | 'streaming';
  summary: string;
  description?: string;
  query?: z.ZodObject;
  /** Request body: component names by media type. */
  body?: Record<string, string>;
  ok: { status?: string; description: string; content?: Media };
  errors: readonly number[];
}

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string): Media => ({ 'application/json': { schema: ref(name) } });

/** Descriptions of the request fields, by name (both request bodies share most); every field must have one. */
const FIELD_DOCS: Record<string, string> = {
  model: "the model to run (the server's default model when absent; GET /v1/models lists them)",
  prompt: 'what to draw; required, not empty and not only whitespace',
  seconds: 'duration: num_frames = seconds × fps, a whole number of frames (never rounded); a number or a numeric string ("4")',
  size: '"WIDTHxHEIGHT" in pixels, multiples of the model\'s pixel stride (e.g. "64x64")',
  input_reference: 'always refused (400 OMNIRX_ERR_UNSUPPORTED_VALUE): no model served does image-to-video',
  num_frames: 'frames of the video; wins over seconds × fps',
  fps: "frames per second (the model's default when absent)",
  num_inference_steps: 'denoise steps',
  guidance_scale: 'classifier-free guidance scale',
  guidance_interval: 'extension: [start, end] fractions of the denoise steps that run guidance (start ≤ end); as a form field "start,end"',
  eta: 'extension: share of fresh noise re-noising each Euler step but the last, in [0, 1] (0: deterministic)',
  negative_prompt: 'what not to draw',
  seed: 'integer 0 … 2³²−1 (random when absent; the one used is echoed)',
  preview_every: "extension: a preview (the first frame the step predicts) on the job's event stream every this many steps",
  n: 'images per request: only 1',
  response_format: 'only "b64_json"',
  limit: 'jobs per page, 1–100 (default 20)',
  after: 'a job id: list the jobs after it',
  order: '"desc" (newest first, the default) or "asc"',
  variant: 'only "video"',
};

/** What each error status means here (each answers the error body). */
const ERROR_DOCS: Record<number, { name: string; description: string }> = {
  400: {
    name: 'BadRequest',
    description:
      'invalid_json, invalid_body (param names the field), or an engine code the request cannot be served with: OMNIRX_ERR_INVALID_REQUEST, OMNIRX_ERR_UNSUPPORTED_VALUE',
  },
  401: { name: 'Unauthorized', description: 'unauthorized: missing or wrong bearer token' },
  404: { name: 'NotFound', description: 'not_found (an unknown job, model or page), or OMNIRX_ERR_UNKNOWN_MODEL (param "model")' },
  409: { name: 'NotReady', description: 'not_ready: the job is not completed' },
  413: { name: 'BodyTooLarge', description: 'body_too_large: a JSON body over 1 MiB, an upload over 8 MiB, too many form parts' },
  415: { name: 'UnsupportedMediaType', description: 'unsupported_media_type: a body that is neither JSON nor multipart/form-data (where taken)' },
  429: { name: 'QueueFull', description: 'OMNIRX_ERR_QUEUE_FULL: the engine queue is full' },
  503: { name: 'Unavailable', description: 'OMNIRX_ERR_UNAVAILABLE (the engine is not up, or the server drains) or OMNIRX_ERR_STAGE_FAILED' },
};

/** Errors any request can meet (a request not received in time, an oversized path segment, a server fault). */
const DEFAULT_ERROR = `any other error: ${Object.entries(HTTP_ERROR_CODES)
  .filter(([, s]) => s === 408 || s === 414 || s === 431 || s >= 500)
  .map(([c, s]) => `${s} ${c}`)
  .join(', ')}`;

const POST_ERRORS = [400, 404, 413, 415, 429, 503] as const;

/** Every HTTP route the server registers, in the order shown. */
export const ROUTE_DOCS: readonly RouteDoc[] = [
  {
    method: 'post',
    path: '/v1/videos',
    tag: 'videos',
    summary: 'Create a video job',
    description:
      "Runs a T2V request. The answer waits until the engine admits the job (status in_progress) or rejects it, at most admitWaitMs (2 s by default); a job still queued then is answered queued. Multipart form fields are text: a numeric field's whole text must be a decimal number.",
    body: { 'application/json': 'VideoCreateBody', 'multipart/form-data': 'VideoCreateForm' },
    ok: { description: 'the job', content: json('VideoObject') },
    errors: POST_ERRORS,
  },
  {
    method: 'get',
    path: '/v1/videos',
    tag: 'videos',
    summary: 'List video jobs',
    query: ListQuerySchema,
    ok: { description: 'a page of jobs', content: json('VideoList') },
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/v1/videos/:id',
    tag: 'videos',
    summary: 'Retrieve a video job',
    ok: { description: 'the job', content: json('VideoObject') },
    errors: [404],
  },
  {
    method: 'delete',
    path: '/v1/videos/:id',
    tag: 'videos',
    summary: 'Cancel and remove a video job',
    description: 'A running job is stopped at its next denoise step; its event streams end with cancelled.',
    ok: { description: 'removed', content: json('VideoDeleted') },
    errors: [404],
  },
  {
    method: 'get',
    path: '/v1/videos/:id/content',
    tag: 'videos',
    summary: "Download a completed job's MP4",
    query: ContentQuerySchema,
    ok: { description: 'the MP4 (H.264)', content: { 'video/mp4': { schema: { type: 'string', format: 'binary' } } } },
    errors: [400, 404, 409],
  },
  {
    method: 'get',
    path: '/v1/videos/:id/events',
    tag: 'videos',
    summary: "A job's events as Server-Sent Events",
    description:
      'One SSE event per engine event (event: <type>, data: <JSON>): queued, admitted, node_start, node_end, step, chunk, artifact, then final, error or cancelled, after which the stream ends. A late subscriber gets the history replayed first. docs/http.md "Server-Sent Events".',
    ok: { description: 'the event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
    errors: [404],
  },
  {
    method: 'post',
    path: '/v1/images/generations',
    tag: 'images',
    summary: 'Generate an image (T2I)',
    description: 'Runs to the end before answering; a client that disconnects first cancels it. JSON only.',
    body: { 'application/json': 'ImageGenerateBody' },
    ok: { description: 'one PNG', content: json('ImagesResponse') },
    errors: POST_ERRORS,
  },
  {
    method: 'get',
    path: '/v1/models',
    tag: 'models',
    summary: 'List the models served',
    ok: { description: 'the models', content: json('ModelList') },
    errors: [],
  },
  {
    method: 'get',
    path: '/v1/models/:id',
    tag: 'models',
    summary: 'Retrieve a model',
    ok: { description: 'the model', content: json('Model') },
    errors: [404],
  },
  {
    method: 'get',
    path: '/health',
    tag: 'operations',
    summary: 'Liveness',
    description: 'Open (no token). 200 while the process serves HTTP and its pipeline can recover.',
    ok: { description: 'alive', content: json('Health') },
    errors: [503],
  },
  {
    method: 'get',
    path: '/ready',
    tag: 'operations',
    summary: 'Readiness',
    description: "Open (no token). 200 while admitting work, with the engine's counts; 503 before the engine is up, while draining or restarting.",
    ok: { description: 'ready', content: json('Ready') },
    errors: [503],
  },
  {
    method: 'get',
    path: '/metrics',
    tag: 'operations',
    summary: 'Prometheus metrics',
    description: 'Open (no token). docs/http.md "Metrics" names them.',
    ok: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/openapi.json',
    tag: 'docs',
    summary: 'This document',
    description: 'Open (no token).',
    ok: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs',
    tag: 'docs',
    summary: 'This document as a web page',
    description: 'Open (no token); self-contained, loads nothing else.',
    ok: { description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/demos/:name',
    tag: 'demos',
    summary: 'Demo pages',
    description: 'Open (no token): /demos/generate and /demos/world, and their ES modules (/demos/NAME.js).',
    ok: { description: 'the page or module', content: { 'text/html': { schema: { type: 'string' } }, 'text/javascript': { schema: { type: 'string' } } } },
    errors: [404],
  },
];

/** The WebSocket endpoints the document knows (by path); any other is listed with a generic description. */
const WEBSOCKET_DOCS: Record<string, { summary: string; description: string }> = {
  '/v1/stream': {
    summary: 'fMP4 (or raw H.264) stream of a generation or a world session (WebSocket)',
    description: 'JSON control messages and binary media fragments, flow control by credits: docs/streaming.md.',
  },
  '/v1/rtc': {
    summary: 'WebRTC world session signaling (WebSocket)',
    description: 'start, offer, answer, then actions over the data channel: docs/webrtc.md.',
  },
};

/** Fastify's `/v1/videos/:id` as OpenAPI's `/v1/videos/{id}`. */
export function openApiPath(fastifyPath: string): string {
  return fastifyPath.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

/** Drops JSON Schema keys that say nothing to a reader: `$schema`/`$id`, and integer bounds that are only JS's safe range. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$schema' || k === '$id') continue;
    if ((k === 'minimum' || k === 'maximum') && Math.abs(v as number) === Number.MAX_SAFE_INTEGER) continue;
    out[k] = tidy(v);
  }
  return out;
}

/** A request schema as JSON Schema (as sent: before transforms), each property described from {@link FIELD_DOCS}. */
function requestSchema(schema: z.ZodType, description: string): JsonSchema {
  const s = tidy(z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12' })) as JsonSchema & { properties: Record<string, JsonSchema> };
  for (const [name, prop] of Object.entries(s.properties)) {
    const doc = FIELD_DOCS[name];
    if (doc !== undefined) prop.description = doc;
  }
  return { description, ...s };
}

function queryParameters(schema: z.ZodObject): JsonSchema[] {
  const s = tidy(z.toJSONSchema(schema, { io: 'input' })) as { properties: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(s.properties).map(([name, prop]) => ({
    name,
    in: 'query',
    required: s.required?.includes(name) ?? false,
    ...(FIELD_DOCS[name] === undefined ? {} : { description: FIELD_DOCS[name] }),
    schema: prop,
  }));
}

function pathParameters(fastifyPath: string): JsonSchema[] {
  return [...fastifyPath.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    description: fastifyPath.startsWith('/v1/videos') ? 'a job id, video_<32 hex>' : fastifyPath.startsWith('/v1/models') ? 'a model id' : 'a page name',
    schema: { type: 'string', maxLength: 256 },
  }));
}

/** The package's version (transports/http under ts-jest, dist/transports/http built). */
function packageVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const p = require(rel) as { name?: unknown; version?: unknown };
      if (p.name === 'omnirx' && typeof p.version === 'string') return p.version;
    } catch {
      // try the next location
    }
  }
  return 'unknown';
}

/** Builds the OpenAPI 3.1 document of a server. */
export function buildOpenApi(options: OpenApiOptions): Record<string, unknown> {
  const responseSchemas = z.toJSONSchema(
    (() => {
      const reg = z.registry<{ id: string }>();
      for (const [id, schema] of Object.entries(RESPONSE_SCHEMAS)) reg.add(schema, { id });
      return reg;
    })(),
    { uri: (id) => `#/components/schemas/${id}`, io: 'output' },
  ).schemas;
  const videoBody = requestSchema(VideoCreateBodySchema, 'POST /v1/videos as JSON; unknown fields are refused.');
  const videoForm = structuredClone(videoBody) as JsonSchema & { properties: Record<string, JsonSchema> };
  videoForm.description = 'POST /v1/videos as multipart/form-data: the same fields as text.';
  videoForm.properties.input_reference = { type: 'string', format: 'binary', description: FIELD_DOCS.input_reference };
  videoForm.properties.guidance_interval = { type: 'string', pattern: '^[^,]+,[^,]+$', description: FIELD_DOCS.guidance_interval };
  const schemas: Record<string, unknown> = {
    VideoCreateBody: videoBody,
    VideoCreateForm: videoForm,
    ImageGenerateBody: requestSchema(
      ImageGenerateBodySchema,
      "POST /v1/images/generations: OpenAI's images fields plus the diffusion knobs; unknown fields are refused.",
    ),
    ...(tidy(responseSchemas) as Record<string, unknown>),
  };
  const errorResponse = (description: string) => ({ description, content: json('Error') });
  const responses: Record<string, unknown> = { Error: errorResponse(DEFAULT_ERROR) };
  for (const { name, description } of Object.values(ERROR_DOCS)) responses[name] = errorResponse(description);

  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTE_DOCS) {
    const auth = options.bearerAuth && r.path.startsWith('/v1');
    const errors = [...r.errors, ...(auth ? [401] : [])].sort((a, b) => a - b);
    const parameters = [...pathParameters(r.path), ...(r.query === undefined ? [] : queryParameters(r.query))];
    const op: Record<string, unknown> = {
      tags: [r.tag],
      summary: r.summary,
      ...(r.description === undefined ? {} : { description: r.description }),
      operationId: `${r.method}${openApiPath(r.path)
        .replace(/[{}]/g, '')
        .replace(/[^A-Za-z0-9]+(.)?/g, (_m, c?: string) => (c ?? '').toUpperCase())}`,
      ...(parameters.length === 0 ? {} : { parameters }),
      ...(r.body === undefined
        ? {}
        : { requestBody: { required: true, content: Object.fromEntries(Object.entries(r.body).map(([type, name]) => [type, { schema: ref(name) }])) } }),
      responses: {
        [r.ok.status ?? '200']: { description: r.ok.description, ...(r.ok.content === undefined ? {} : { content: r.ok.content }) },
        ...Object.fromEntries(errors.map((s) => [String(s), { $ref: `#/components/responses/${ERROR_DOCS[s]!.name}` }])),
        default: { $ref: '#/components/responses/Error' },
      },
      security: auth ? [{ bearerAuth: [] }] : [],
    };
    (paths[openApiPath(r.path)] ??= {})[r.method] = op;
  }
  for (const p of options.websocketPaths) {
    const doc = WEBSOCKET_DOCS[p] ?? { summary: 'WebSocket endpoint', description: 'A WebSocket upgrade.' };
    const auth = options.bearerAuth;
    paths[p] = {
      get: {
        tags: ['streaming'],
        summary: doc.summary,
        description: `${doc.description} An HTTP/1.1 GET with Upgrade: websocket; a refused upgrade is answered in the error shape.${auth ? ' The token goes in the Authorization header or, from a browser, as ?token=.' : ''}`,
        operationId: `websocket${p.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c?: string) => (c ?? '').toUpperCase())}`,
        responses: {
          '101': { description: 'Switching Protocols: the WebSocket is open' },
          '400': { $ref: '#/components/responses/BadRequest' },
          ...(auth ? { '401': { $ref: '#/components/responses/Unauthorized' } } : {}),
          default: { $ref: '#/components/responses/Error' },
        },
        security: auth ? [{ bearerAuth: [] }] : [],
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'omnirx',
      version: packageVersion(),
      description:
        'An OpenAI-compatible API over one omnirx deployment: video jobs, image generations, models, job events over SSE, and operational routes. Every error response is {"error": {type, message, param, code}}. docs/http.md has the whole story.',
    },
    tags: [
      { name: 'videos', description: 'video jobs (OpenAI videos API)' },
      { name: 'images', description: 'image generations (OpenAI images API)' },
      { name: 'models', description: 'the models served' },
      { name: 'streaming', description: 'WebSocket endpoints' },
      { name: 'operations', description: 'liveness, readiness, metrics' },
      { name: 'docs', description: 'this document' },
      { name: 'demos', description: 'demo pages' },
    ],
    paths,
    components: {
      schemas,
      responses,
      ...(options.bearerAuth
        ? { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'the api key: Authorization: Bearer <key>' } } }
        : {}),
    },
  };
}
