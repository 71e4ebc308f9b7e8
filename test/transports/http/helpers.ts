import type { FastifyInstance } from 'fastify';
import { createServer, type ServerOptions } from '../../../transports/server';
import { makeModelsDir } from '../../helpers/tiny-model';
import { builtinFamilies } from '../../../src/families';

/** A listening test server on 127.0.0.1 with a random port, over an engine on the tiny test model. */
export interface TestServer {
  app: FastifyInstance;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  port: number;
}

/**
 * Creates a server on the tiny model (default model `tiny`) and waits until its engine is up, without listening:
 * requests go through `app.inject()`, no socket opened.
 */
export async function createApp(options: ServerOptions = {}): Promise<FastifyInstance> {
  const modelsDir = options.modelsDir ?? (await makeModelsDir());
  const app = await createServer({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', ...options });
  await app.omnirx.engineReady;
  return app;
}

/** Starts `app` listening on 127.0.0.1 (random port). */
export async function listen(app: FastifyInstance): Promise<TestServer> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('the server has no TCP address');
  return { app, origin: `http://127.0.0.1:${addr.port}`, port: addr.port };
}

/** Starts a server on the tiny model (default model `tiny`), waits until its engine is up, and listens. */
export async function startServer(options: ServerOptions = {}): Promise<TestServer> {
  return listen(await createApp(options));
}

/** One parsed Server-Sent Event. */
export interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/**
 * Reads `GET url` as an SSE stream to its end (or until `until` returns true for an event; the connection is
 * then closed) and returns the events in order. `onEvent` sees each event as it arrives.
 */
export async function readSse(
  url: string,
  opts: { headers?: Record<string, string>; until?: (e: SseEvent) => boolean; onEvent?: (e: SseEvent) => void | Promise<void> } = {},
): Promise<{ status: number; contentType: string | null; events: SseEvent[] }> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: opts.headers, signal: ac.signal });
  const events: SseEvent[] = [];
  if (res.body === null) return { status: res.status, contentType: res.headers.get('content-type'), events };
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const lines = block.split('\n');
        const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
        const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
        if (event === undefined || data === undefined) continue;
        const e = { event, data: JSON.parse(data) as Record<string, unknown> };
        events.push(e);
        await opts.onEvent?.(e);
        if (opts.until?.(e)) {
          ac.abort();
          return { status: res.status, contentType: res.headers.get('content-type'), events };
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return { status: res.status, contentType: res.headers.get('content-type'), events };
}
