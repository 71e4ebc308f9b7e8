import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** pino's levels, most severe last but one; `silent` writes nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A client's `X-Request-Id` is kept when it is this plain and short (it is echoed in headers and logs). */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The id of an HTTP request (Fastify's `genReqId`): the client's `X-Request-Id` when it is 1–128 characters of
 * `[A-Za-z0-9._:-]`, else a new UUID (a hostile header never reaches a log line or a response header as sent).
 */
export function requestIdOf(req: IncomingMessage): string {
  const h = req.headers['x-request-id'];
  return typeof h === 'string' && CLIENT_REQUEST_ID.test(h) ? h : randomUUID();
}

/** Routes polled by probes and scrapers: their access lines are `debug`, so `info` stays readable. */
const PROBES = new Set(['/health', '/ready', '/metrics']);

/**
 * Writes the access line of a finished request on its logger (which carries `reqId`): method, route, url (at most
 * 200 characters), status and ms; `info`, or `debug` for probes.
 */
export function logResponse(req: FastifyRequest, reply: FastifyReply): void {
  const route = req.routeOptions.url;
  const fields = { method: req.method, route: route ?? null, url: req.url.slice(0, 200), status: reply.statusCode, ms: Math.round(reply.elapsedTime) };
  if (route !== undefined && PROBES.has(route)) req.log.debug(fields, 'request completed');
  else req.log.info(fields, 'request completed');
}
