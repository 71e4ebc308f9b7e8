import type { FastifyInstance } from 'fastify';
import { resolveFfmpeg } from '../../src/media/ffmpeg';
import type { ServerContext } from '../http/context';
import { registerDemoRoutes } from '../http/routes/demos';
import { admitting } from '../http/routes/shared';
import { StreamConnection } from './stream-connection';

/** Options of {@link registerStreamRoutes}. */
export interface StreamRouteOptions {
  /** WebSocket path. Default `/v1/stream`. */
  path?: string;
  /** Most credits a client may hold unspent, frames. Default 64. */
  maxCredits?: number;
  /** Most bytes a socket may hold unsent before the stream is closed as too slow (1008). Default 16 MiB. */
  maxBufferedBytes?: number;
  /** ffmpeg binary; resolved once with `resolveFfmpeg()` (on the first stream) when absent. */
  ffmpegPath?: string;
}

/**
 * Serves fMP4 (or raw H.264) streams of generations and world sessions over WebSocket at `/v1/stream` (protocol in
 * docs/streaming.md), on the server's WebSocket router (so the server's bearer token applies: `Authorization`
 * header or `?token=`), and the demo pages at `/demos/…` (`registerDemoRoutes`).
 * @throws Error when the path already has a WebSocket handler.
 */
export function registerStreamRoutes(app: FastifyInstance, ctx: ServerContext, options: StreamRouteOptions = {}): void {
  let ffmpeg: Promise<string> | undefined;
  const ffmpegPath = () => {
    ffmpeg ??= options.ffmpegPath !== undefined ? Promise.resolve(options.ffmpegPath) : resolveFfmpeg().then((f) => f.path);
    return ffmpeg;
  };
  const deps = {
    engine: ctx.engine,
    admitting: () => admitting(ctx),
    ffmpegPath,
    maxCredits: options.maxCredits ?? 64,
    maxBufferedBytes: options.maxBufferedBytes ?? 16 * 2 ** 20,
  };
  app.omnirx.websockets.route(options.path ?? '/v1/stream', (ws) => new StreamConnection(ws, deps));
  registerDemoRoutes(app);
}
