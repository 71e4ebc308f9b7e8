import { createHash, timingSafeEqual } from 'node:crypto';
import multipart from '@fastify/multipart';
import Fastify, { LogController, type FastifyInstance, type FastifyReply } from 'fastify';
import { OmniError } from '../src/errors';
import { resolveFfmpeg } from '../src/media/ffmpeg';
import type { DeployConfig } from '../src/placement/deploy-config';
import type { ModelFamily } from '../src/pipeline/family/family';
import { openJobStore } from './http/job-store';
import { JobTable } from './http/jobs';
import { httpTransport } from './http/plugin';
import { answerClientError, answerOnSocket } from './shared/client-error';
import { LOG_LEVELS, logResponse, requestIdOf, type LogLevel } from './shared/access-log';
import type { ServerContext } from './shared/context';
import { parseCorsOrigins, registerCors } from './shared/cors';
import { HttpError, toHttpError } from './shared/errors';
import { parseJsonBody } from './shared/json-body';
import { ServerMetrics } from './shared/metrics';
import type { ServedEngine } from './shared/served-engine';
import { usableModels } from './shared/usable-models';
import { WebSocketRouter } from './shared/websocket-router';
import { webrtcTransport } from './webrtc/plugin';
import { wsTransport } from './ws/plugin';

/** Options of {@link createServer}. */
export interface ServerOptions {
  /** The engine to serve (the server closes it when it closes). Default: `Engine.fromDeployConfig(deploy, { families })`. */
  engine?: ServedEngine | Promise<ServedEngine>;
  /** The model families of the engine the server creates (`builtinFamilies()` from 'omnirx'); needed when `engine` is not given. */
  families?: readonly ModelFamily[];
  /** Models folder of the engine the server creates (ignored when `engine` is given). */
  modelsDir?: string;
  /** Default model of the engine the server creates. */
  defaultModel?: string;
  /**
   * Deploy config of the deployment the server opens (tasks, cache budgets, sessions, and the topology: monolithic, or
   * Encode → Denoise → Decode stages); `modelsDir`/`defaultModel` above win. Default: the defaults of every field.
   */
  deploy?: DeployConfig;
  /** Bearer token required on every `/v1` route when set (non-empty); `/health`, `/ready` and `/metrics` stay open. */
  apiKey?: string;
  /**
   * Longest time to receive a whole request, headers and body, ms: past it the server answers 408 `request_timeout`
   * (checked every second) and closes the connection. Handling a request and streaming its response (a long image
   * request, an SSE stream) have no time limit. Default 60000.
   */
  requestTimeoutMs?: number;
  /** Largest JSON body, bytes. Default 1 MiB. */
  bodyLimitBytes?: number;
  /** Largest uploaded file (`input_reference`) in a multipart body, bytes. Default 8 MiB. */
  maxUploadBytes?: number;
  /** Finished job records kept (completed or failed; oldest forgotten first). Default 256. */
  maxFinishedJobs?: number;
  /** Finished MP4 files kept on disk. Default 64. */
  maxStoredVideos?: number;
  /** Bytes of finished MP4 files kept on disk. Default 512 MiB. */
  maxStoredVideoBytes?: number;
  /** Finished jobs (record and MP4) are forgotten this many seconds after they finished. Default: kept until a bound above. */
  jobRetentionSeconds?: number;
  /**
   * Data folder that makes video jobs durable (`<dataDir>/jobs.sqlite` and `<dataDir>/videos/`, locked for one server):
   * after a restart finished jobs are still listed and downloadable and queued ones run. Default: jobs in memory, MP4s
   * in a temporary folder removed at close. docs/http.md "Job retention".
   */
  dataDir?: string;
  /** Longest wait of `POST /v1/videos` for admission (or rejection) before it answers `queued`, ms. Default 2000. */
  admitWaitMs?: number;
  /** ffmpeg binary; resolved once with `resolveFfmpeg()` when absent. */
  ffmpegPath?: string;
  /**
   * Least severe log entry written (pino levels; `silent` writes none). Entries are JSON lines: one per HTTP request at
   * `info` (`debug` for `/health`, `/ready`, `/metrics`) with its request id, video job lifecycle at `info` (`warn`
   * when a job fails), stage restarts at `warn`, server errors and a pipeline going down at `error`. Default `silent`
   * (`omnirx serve` defaults to `info`). docs/http.md "Logs".
   */
  logLevel?: LogLevel;
  /** Where log lines go. Default stdout. */
  logStream?: NodeJS.WritableStream;
  /**
   * Origins whose pages may call the server from a browser (CORS), each exactly as a browser sends it in `Origin`:
   * `scheme://host[:port]`, e.g. `"https://app.example.com"`; `"*"` is refused. Off (no `Access-Control-*` header)
   * when absent or empty. docs/http.md "CORS".
   */
  corsOrigins?: readonly string[];
}

/** What a drain did. */
export interface DrainResult {
  /** Jobs in flight when the drain began that finished (completed or failed on their own). */
  finished: number;
  /** Jobs still in flight when the wait ran out, failed with `OMNIRX_ERR_UNAVAILABLE`. */
  failed: number;
  /** With a data folder: jobs still queued when the wait ran out, kept to run at the next start (absent when none). */
  kept?: number;
}

/** The omnirx handle decorated onto the Fastify instance. */
export interface OmnirxHandle {
  /** Resolves once the engine is up (`/ready` answers 200 from then on); rejects when it failed to start. */
  readonly engineReady: Promise<void>;
  readonly jobs: JobTable;
  readonly metrics: ServerMetrics;
  /** WebSocket endpoints of this server (fMP4 streams, WebRTC signaling): `websockets.route(path, handler)`. */
  readonly websockets: WebSocketRouter;
  /**
   * Graceful drain: stops admitting (`/ready` and new work answer 503), waits up to `timeoutMs` for the jobs in
   * flight, fails the rest with `OMNIRX_ERR_UNAVAILABLE` (with a data folder, jobs still queued are kept for the next
   * start instead), then closes the server (and with it the engine, and the stored MP4s unless they live in a data
   * folder). Calling it again returns the same promise.
   */
  drain(timeoutMs: number): Promise<DrainResult>;
}

declare module 'fastify' {
  interface FastifyInstance {
    omnirx: OmnirxHandle;
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** Longest path parameter the router takes, characters. */
const MAX_PATH_PARAM = 256;

/**
 * Builds the omnirx server over an engine: the Fastify instance with everything app-wide (body limits and parsers,
 * the bearer-token hook, metrics, the error and not-found answers, the WebSocket upgrade router, drain, the
 * `omnirx` decoration, the engine's start-up), and the transports registered on it as sibling plugins:
 * `httpTransport` (OpenAI-compatible routes, SSE, demo pages — docs/http.md), `webrtcTransport` (`/v1/rtc` —
 * docs/webrtc.md) and `wsTransport` (`/v1/stream` — docs/streaming.md). Returns the instance, not yet listening
 * (`await app.listen({ host: '127.0.0.1', port })`); the engine comes up in the background
 * (`app.omnirx.engineReady`, which rejects with `OMNIRX_ERR_CONFIG` when neither `engine` nor `families` is given, and
 * with `OMNIRX_ERR_UNKNOWN_MODEL` when the default model is not served). Every error response is
 * `{"error": {type, message, param, code}}`.
 * @throws OmniError OMNIRX_ERR_CONFIG (`param` "apiKey") for an empty or blank `apiKey`, which would serve without auth;
 *   (`param` "requestTimeoutMs") for a request timeout outside [100 ms, 1 h]; (`param` "corsOrigins") for an entry that
 *   is not an origin.
 */
export async function createServer(options: ServerOptions = {}): Promise<FastifyInstance> {
  if (options.apiKey !== undefined && (typeof options.apiKey !== 'string' || options.apiKey.trim() === '')) {
    throw new OmniError('OMNIRX_ERR_CONFIG', 'apiKey must be a non-empty string (leave it out to serve without auth)', { param: 'apiKey' });
  }
  const bodyLimit = options.bodyLimitBytes ?? 2 ** 20;
  const requestTimeout = options.requestTimeoutMs ?? 60_000;
  if (!Number.isInteger(requestTimeout) || requestTimeout < 100 || requestTimeout > 3_600_000) {
    throw new OmniError('OMNIRX_ERR_CONFIG', `requestTimeoutMs must be an integer in [100, 3600000] ms; got ${String(requestTimeout)}`, {
      param: 'requestTimeoutMs',
    });
  }
  const corsOrigins = parseCorsOrigins(options.corsOrigins);
  const logLevel = options.logLevel ?? 'silent';
  if (!(LOG_LEVELS as readonly unknown[]).includes(logLevel))
    throw new OmniError('OMNIRX_ERR_CONFIG', `logLevel must be one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(logLevel)}`, { param: 'logLevel' });
  const app = Fastify({
    logger: { level: logLevel, ...(options.logStream === undefined ? {} : { stream: options.logStream }) },
    // One access line per request from the onResponse hook below, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestIdOf,
    bodyLimit,
    // Node's request timeout answers a request not received in time (408, through clientErrorHandler); no socket
    // inactivity timeout, which cut long requests and quiet SSE streams with no answer at all. Idle keep-alive
    // connections still close after Fastify's keepAliveTimeout.
    requestTimeout,
    connectionTimeout: 0,
    http: { requestTimeout, headersTimeout: requestTimeout, connectionsCheckingInterval: 1000 },
    return503OnClosing: true,
    // Path parameters (model and job ids: at most 128 characters) longer than this are refused with 414.
    routerOptions: { maxParamLength: MAX_PATH_PARAM },
    // Errors Fastify raises before routing (a URL that is not valid percent-encoding, …) in the same error shape.
    frameworkErrors: (err, _req, reply) => {
      const h =
        (err as { code?: unknown }).code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? HttpError.of('uri_too_long', `a path segment is longer than ${MAX_PATH_PARAM} characters (model and job ids have at most 128)`)
          : toHttpError(err);
      void (reply as FastifyReply).status(h.status).send(h.body());
    },
    // …and what Node's HTTP parser refuses before Fastify sees a request (oversized headers, garbage request lines).
    clientErrorHandler: answerClientError,
  });
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (e) {
      done(e as Error, undefined);
    }
  });
  const uploadLimits = { fileSize: options.maxUploadBytes ?? 8 * 2 ** 20, files: 1, fields: 32, fieldSize: 64 * 2 ** 10, parts: 40, fieldNameSize: 100 };
  await app.register(multipart, { limits: uploadLimits });
  // Before the bearer-token hook: a browser's preflight carries no Authorization header.
  await registerCors(app, corsOrigins);
  // The multipart plugin's 413s say "reach fields limit" and the like: say which limit and its value.
  const multipartLimitMessages: Record<string, string> = {
    FST_PARTS_LIMIT: `the multipart body has more than ${uploadLimits.parts} parts`,
    FST_FILES_LIMIT: `the multipart body has more than ${uploadLimits.files} file`,
    FST_FIELDS_LIMIT: `the multipart body has more than ${uploadLimits.fields} fields`,
    FST_REQ_FILE_TOO_LARGE: `the uploaded file is over ${uploadLimits.fileSize} bytes`,
  };

  let engine: ServedEngine | undefined;
  let startError: string | undefined;
  const state: ServerContext['state'] = { phase: 'starting' };
  let ffmpeg: Promise<string> | undefined;
  const ffmpegPath = () => {
    ffmpeg ??= options.ffmpegPath !== undefined ? Promise.resolve(options.ffmpegPath) : resolveFfmpeg().then((f) => f.path);
    return ffmpeg;
  };
  let jobs: JobTable | undefined;
  const metrics = new ServerMetrics({
    waitingJobs: () => jobs?.active().filter((j) => j.status === 'queued').length ?? 0,
    storedVideos: () => jobs?.store.usage() ?? { files: 0, bytes: 0 },
  });
  jobs = new JobTable({
    log: app.log,
    store: { maxFiles: options.maxStoredVideos ?? 64, maxBytes: options.maxStoredVideoBytes ?? 512 * 2 ** 20 },
    maxFinishedJobs: options.maxFinishedJobs ?? 256,
    durable: openJobStore(options),
    ...(options.jobRetentionSeconds === undefined ? {} : { retentionSeconds: options.jobRetentionSeconds }),
    ffmpegPath,
    metrics,
  });
  const table = jobs;
  const websockets = new WebSocketRouter({
    authorize: (req, url) => {
      if (options.apiKey === undefined) return undefined;
      const h = req.headers.authorization;
      const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h.trim()) : null;
      const given = m?.[1] ?? url.searchParams.get('token') ?? undefined;
      return given !== undefined && sameSecret(given, options.apiKey) ? undefined : 'invalid or missing api key';
    },
  });
  const ctx: ServerContext = {
    engine: () => {
      if (engine === undefined)
        throw HttpError.engine('OMNIRX_ERR_UNAVAILABLE', startError === undefined ? 'the engine is not up yet' : `the engine failed to start: ${startError}`);
      return engine;
    },
    metrics,
    state,
    websockets,
  };

  const engineReady = (async () => {
    const open = async (families: readonly ModelFamily[]): Promise<ServedEngine> => {
      const { Engine } = await import('../src/engine/engine');
      const { parseDeployConfig } = await import('../src/placement/deploy-config');
      const overrides = {
        ...(options.modelsDir === undefined ? {} : { modelsDir: options.modelsDir }),
        ...(options.defaultModel === undefined ? {} : { defaultModel: options.defaultModel }),
      };
      return Engine.fromDeployConfig({ ...(options.deploy ?? parseDeployConfig({ schemaVersion: 1 })), ...overrides }, { families, logger: app.log });
    };
    if (options.engine === undefined && options.families === undefined)
      throw new OmniError('OMNIRX_ERR_CONFIG', 'createServer needs an engine or the model families to build one (families: builtinFamilies() from omnirx)', {
        param: 'families',
      });
    const e = options.engine ?? open(options.families!);
    const started = await e;
    // A deployment whose default model is not there could never serve a request that names none: refuse to start.
    const def = started.models.defaultModel;
    if (def !== undefined && !started.listModels().includes(def)) {
      await started.close();
      throw new OmniError(
        'OMNIRX_ERR_UNKNOWN_MODEL',
        `the default model '${def}' is not in ${started.models.modelsDir ?? 'the models folder'} (found: ${started.listModels().join(', ') || 'none'}); name one of them as defaultModel (the deploy config's, or createServer's)`,
      );
    }
    // A model folder whose model.json does not read is not offered; say so once, where an operator looks.
    for (const b of (await usableModels(started)).broken)
      app.log.warn({ model: b.id, code: b.code, reason: b.message }, 'model is not served: its model.json cannot be used');
    engine = started;
    metrics.engine.attach(started);
    if (state.phase === 'starting') state.phase = 'ready';
  })();
  engineReady.catch((err: unknown) => {
    startError = err instanceof Error ? err.message : String(err);
  });

  let draining: Promise<DrainResult> | undefined;
  const drain = (timeoutMs: number): Promise<DrainResult> => {
    draining ??= (async () => {
      state.phase = 'draining';
      const inFlight = table.active();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        Promise.all(inFlight.map((j) => j.done)).then(() => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
      ]);
      clearTimeout(timer);
      const { failed, kept } = timedOut ? table.stopActive('OMNIRX_ERR_UNAVAILABLE', 'the server shut down before the job finished') : { failed: 0, kept: 0 };
      await app.close();
      return { finished: inFlight.length - failed - kept, failed, ...(kept > 0 ? { kept } : {}) };
    })();
    return draining;
  };
  app.server.on('upgrade', websockets.onUpgrade);
  // CONNECT (a proxy tunnel request) would otherwise get the socket closed without an answer.
  app.server.on('connect', (_req, socket) => answerOnSocket(socket, HttpError.of('method_not_allowed', 'CONNECT is not served: this is not a proxy')));
  app.decorate('omnirx', { engineReady, jobs: table, metrics, websockets, drain });

  // Before the listener closes: ending the active jobs also ends their SSE responses, which would hold it open.
  app.addHook('preClose', async () => {
    state.phase = 'draining';
    websockets.close();
    table.closeActive();
  });
  app.addHook('onClose', async () => {
    metrics.engine.detach();
    table.dispose();
    await engineReady.catch(() => undefined);
    await engine?.close();
  });

  if (options.apiKey !== undefined) {
    const key = options.apiKey;
    app.addHook('onRequest', async (req) => {
      // A CORS preflight never carries a token (browsers send none) and OPTIONS serves nothing else: not checked.
      if (req.method === 'OPTIONS' || !req.url.startsWith('/v1')) return;
      const h = req.headers.authorization;
      const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h.trim()) : null;
      if (m === null) throw HttpError.of('unauthorized', 'missing bearer token: send "Authorization: Bearer <api key>"');
      if (!sameSecret(m[1]!, key)) throw HttpError.of('unauthorized', 'invalid api key');
    });
  }

  app.addHook('onRequest', async (req, reply) => {
    void reply.header('x-request-id', req.id);
  });
  app.addHook('onResponse', async (req, reply) => {
    logResponse(req, reply);
    metrics.requestSeconds.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  app.setErrorHandler(async (err, req, reply) => {
    let h = toHttpError(err);
    // Fastify's 415 says only "Unsupported Media Type": say what was sent and what is taken.
    const code = (err as { code?: unknown }).code;
    if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      h = HttpError.of(
        'unsupported_media_type',
        `the body's content type ${JSON.stringify(String(req.headers['content-type'] ?? '').slice(0, 100))} is not taken here: send application/json or multipart/form-data`,
      );
    } else if (typeof code === 'string' && Object.prototype.hasOwnProperty.call(multipartLimitMessages, code)) {
      h = HttpError.of('body_too_large', multipartLimitMessages[code]!);
    } else if (code === 'FST_PROTO_VIOLATION') {
      // The multipart plugin refuses the field before we see its name.
      h = HttpError.of(
        'invalid_body',
        'a multipart field is named after an Object.prototype property (__proto__, constructor, toString, …); no such field exists',
      );
    }
    metrics.failures.inc({ code: h.code });
    if (h.status >= 500) req.log.error(err);
    return reply.status(h.status).send(h.body());
  });
  app.setNotFoundHandler(async (req, reply) => {
    const h = HttpError.of('not_found', `no route ${req.method} ${req.url.slice(0, 200)}`);
    metrics.failures.inc({ code: h.code });
    return reply.status(404).send(h.body());
  });

  // Registered last, so that each plugin's context inherits the parsers, hooks and handlers above.
  await app.register(httpTransport, { ctx, jobs: table, admitWaitMs: options.admitWaitMs ?? 2000, bearerAuth: options.apiKey !== undefined, engineReady });
  await app.register(webrtcTransport, { ctx, ...(options.deploy?.webrtc !== undefined ? { webrtc: options.deploy.webrtc } : {}) });
  await app.register(wsTransport, { ctx });
  return app;
}
