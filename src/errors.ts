/**
 * The error catalogue: every error omnirx raises on purpose has a stable `code` (callers switch on it, never on
 * the message), an HTTP status for transports, and a one-line meaning. `docs/errors.md` lists the same codes; a
 * test keeps the two in sync.
 */
export const ERROR_CATALOGUE = {
  OMNIRX_ERR_INVALID_REQUEST: { status: 400, meaning: 'The request failed schema validation or a resource ceiling; `param` names the field.' },
  OMNIRX_ERR_UNSUPPORTED_VALUE: {
    status: 400,
    meaning: 'A value is well-formed but the model cannot honour it (e.g. a width that is not a multiple of its stride); never silently adjusted.',
  },
  OMNIRX_ERR_INVALID_PIPELINE: {
    status: 500,
    meaning:
      'A pipeline spec failed validation at build (edge type mismatch, cycle, missing component, two policies in one slot); the message names the node or edge.',
  },
  OMNIRX_ERR_QUEUE_FULL: { status: 429, meaning: 'The engine queue is at its bound; the request was not admitted. Retry later.' },
  OMNIRX_ERR_MEMORY: {
    status: 400,
    meaning: 'The request can never fit the memory budget of its pool (resident + peak bytes); the message gives both figures.',
  },
  OMNIRX_ERR_CACHE_EXHAUSTED: {
    status: 503,
    meaning: 'A KV cache pool (chunk slabs or token blocks) has no room for this session or sequence; only that owner fails. Retry later.',
  },
  OMNIRX_ERR_UNKNOWN_MODEL: { status: 404, meaning: 'No registered model has this id.' },
  OMNIRX_ERR_MODEL_LOAD: { status: 500, meaning: 'A model directory is missing a file, or its config or weights do not match the architecture.' },
  OMNIRX_ERR_SAFETENSORS: { status: 500, meaning: 'A safetensors file is malformed; the message names the tensor and the byte offset.' },
  OMNIRX_ERR_NATIVE: { status: 500, meaning: 'A native kernel or plan rejected its input (shape, freed tensor) or failed while running.' },
  OMNIRX_ERR_INTERNAL: { status: 500, meaning: 'An unexpected failure inside omnirx that carries no code of its own (a bug); the message says what failed.' },
  OMNIRX_ERR_UNAVAILABLE: { status: 503, meaning: 'The engine is closed and admits no new requests.' },
  OMNIRX_ERR_NON_FINITE: { status: 500, meaning: 'A step produced NaN or infinite values; only the request that produced them fails.' },
  OMNIRX_ERR_OUTPUT_PATH: {
    status: 400,
    meaning: 'The output path cannot take the file: it is a directory, device or symlink, or its folder is not writable.',
  },
  OMNIRX_ERR_FFMPEG: { status: 500, meaning: 'ffmpeg could not be found or exited with an error while encoding.' },
  OMNIRX_ERR_CONFIG: {
    status: 500,
    meaning: 'A deploy config file is unreadable, not JSON, or has an invalid field; the message names the field as a dotted path.',
  },
  OMNIRX_ERR_SESSION_EXPIRED: {
    status: 410,
    meaning: 'A world session was closed because it was idle (no action, credit, flush or frame) for its idle timeout; its caches were freed.',
  },
  OMNIRX_ERR_CLI_ARGUMENT: {
    status: 400,
    meaning: 'A command-line argument is out of range or of the wrong type; the message names the flag and its allowed range.',
  },
  OMNIRX_ERR_PAYLOAD: {
    status: 500,
    meaning:
      'A stage payload or its wire frame is malformed (bad magic, newer schema version, truncated, checksum, shape/bytes mismatch); the message names the byte offset or tensor.',
  },
  OMNIRX_ERR_CONNECTOR: {
    status: 503,
    meaning: 'A stage connector is closed or lost its peer before the receiver accepted a payload; the payload was not delivered.',
  },
  OMNIRX_ERR_INTERRUPTED: {
    status: 503,
    meaning: 'The server stopped (closed, or killed) while the job ran; the job ended failed and can be created again.',
  },
  OMNIRX_ERR_STAGE_FAILED: {
    status: 503,
    meaning:
      'A stage process of a disaggregated topology died (or failed to start) while it held the request; the stage is restarted and new requests succeed once it is back.',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Base class of the errors omnirx throws on purpose. `param` is the offending field as a dotted path, if any. */
export class OmniError extends Error {
  override readonly name: string = 'OmniError';
  readonly code: ErrorCode;
  readonly status: number;
  readonly param?: string;

  constructor(code: ErrorCode, message: string, options: { param?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    if (options.param !== undefined) this.param = options.param;
  }
}

/** An absolute file path in a message: a `/` at the start or after a space, quote, bracket or `=`, up to the next one. */
const ABSOLUTE_PATH = /(^|[\s'"`([=])\/[^\s'"`()[\]]*/g;

/**
 * `message` with every absolute file path shortened to its last segment (`open '/srv/models/x/vae.safetensors'` →
 * `open '…/vae.safetensors'`). For the message of an error omnirx did not raise on purpose (an errno error names the
 * file it failed on) before it reaches a client: the server's folders stay on the server, whose log keeps the error.
 */
export function withoutServerPaths(message: string): string {
  return message.replace(ABSOLUTE_PATH, (found: string, lead: string) => `${lead}…/${found.slice(found.lastIndexOf('/') + 1)}`);
}
