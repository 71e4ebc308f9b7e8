/**
 * Error type for malformed or unsupported safetensors files.
 *
 * Format reference: https://github.com/huggingface/safetensors
 */

/** Options describing where in a safetensors file a problem was found. */
export interface SafetensorsErrorLocation {
  /** File path (or other label) of the file being read or written. */
  source?: string;
  /** Name of the tensor the problem concerns, if any. */
  tensor?: string;
  /** Absolute byte offset in the file where the problem is, if known. */
  offset?: number;
  /** Underlying error (e.g. the JSON.parse SyntaxError). */
  cause?: unknown;
}

const MAX_NAME_IN_MESSAGE = 200;

/** Quote a (possibly hostile) tensor name for a message: JSON-escaped and length-capped. */
export function quoteTensorName(name: string): string {
  const shown = name.length > MAX_NAME_IN_MESSAGE ? `${name.slice(0, MAX_NAME_IN_MESSAGE)}…` : name;
  return JSON.stringify(shown);
}

/**
 * Thrown for every problem with the *content* of a safetensors file (or with
 * the arguments given to the writer). The message is
 * `<source>: tensor "<name>": <detail>`, where the source and tensor parts are
 * present when known; the detail names the byte offset where relevant.
 */
export class SafetensorsError extends Error {
  override readonly name = 'SafetensorsError';
  readonly code = 'OMNIRX_ERR_SAFETENSORS' as const;
  /** File path (or label) of the file concerned. */
  readonly source?: string;
  /** Tensor the problem concerns. */
  readonly tensor?: string;
  /** Absolute byte offset in the file where the problem is. */
  readonly offset?: number;

  constructor(detail: string, location: SafetensorsErrorLocation = {}) {
    const prefix = location.source !== undefined && location.source !== '' ? location.source : 'safetensors';
    const tensorPart = location.tensor !== undefined ? `tensor ${quoteTensorName(location.tensor)}: ` : '';
    super(
      `${prefix}: ${tensorPart}${detail}`,
      location.cause !== undefined ? { cause: location.cause } : undefined,
    );
    if (location.source !== undefined) this.source = location.source;
    if (location.tensor !== undefined) this.tensor = location.tensor;
    if (location.offset !== undefined) this.offset = location.offset;
  }
}
