import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Observable } from 'rxjs';
import type { PublicEvent } from './public-event';

/** One Server-Sent Event: `event: <type>` and the JSON of the event as `data`. */
export function formatSse(ev: PublicEvent): string {
  return `event: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`;
}

/**
 * Streams `events$` to the client as `text/event-stream` (the reply is hijacked: Fastify sends nothing more).
 * The response ends when the stream completes; a client that disconnects only unsubscribes (the job runs on).
 * A slow client is not buffered without bound: the stream holds at most one job's history (bounded there).
 */
export function streamSse(reply: FastifyReply, events$: Observable<PublicEvent>): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    // Headers hooks set before the handler (CORS's Access-Control-Allow-Origin), which a hijacked reply does not send.
    ...(reply.getHeaders() as OutgoingHttpHeaders),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write(': omnirx job events\n\n');
  const sub = events$.subscribe({
    next: (ev) => void res.write(formatSse(ev)),
    complete: () => res.end(),
  });
  res.on('close', () => sub.unsubscribe());
}
