import type { FastifyInstance } from 'fastify';
import { resolveFfmpeg } from '../../src/media/ffmpeg';
import { admitting } from '../shared/admission';
import type { ServerContext } from '../shared/context';
import { StreamConnection } from './stream-connection';

/** Options of {@link wsTransport}. */
export interface WsTransportOptions {
  /** The server's shared context (engine, lifecycle state, WebSocket router). */
  ctx: ServerContext;
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
 * The WebSocket streaming transport, a Fastify plugin: fMP4 (or raw H.264) streams of generations and world
 * sessions at `/v1/stream` (protocol in docs/streaming.md), on the server's WebSocket router (so the server's
 * bearer token applies: `Authorization` header or `?token=`). It registers no HTTP route.
 * @throws Error when the path already has a WebSocket handler.
 */
export async function wsTransport(_app: FastifyInstance, opts: WsTransportOptions): Promise<void> {
  const { ctx } = opts;
  let ffmpeg: Promise<string> | undefined;
  const ffmpegPath = () => {
    ffmpeg ??= opts.ffmpegPath !== undefined ? Promise.resolve(opts.ffmpegPath) : resolveFfmpeg().then((f) => f.path);
    return ffmpeg;
  };
  const deps = {
    engine: ctx.engine,
    admitting: () => admitting(ctx),
    ffmpegPath,
    maxCredits: opts.maxCredits ?? 64,
    maxBufferedBytes: opts.maxBufferedBytes ?? 16 * 2 ** 20,
  };
  ctx.websockets.route(opts.path ?? '/v1/stream', (ws) => new StreamConnection(ws, deps));
}
