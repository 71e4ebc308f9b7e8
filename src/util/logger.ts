/**
 * The structured logging calls omnirx makes: a subset of pino's API, so Fastify's `app.log` (or any pino logger) can
 * be handed down to the engine. Each call takes the fields first (ids, codes, pids) and a short message.
 */
export interface Logger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Drops every entry: the default of the library, which logs only through a logger it is given. */
export const silentLogger: Logger = Object.freeze({
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
});
