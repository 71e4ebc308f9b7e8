import { z } from 'zod';
import { OmniError } from '../errors';
import { createTensor, type NativeBinding, type NativeTensor } from '../native/binding';

/** The payload schema version this omnirx writes and reads. A payload with another version is refused. */
export const PAYLOAD_SCHEMA_VERSION = 1;

/** Ceilings of one payload. Exceeding one is an OMNIRX_ERR_PAYLOAD, never a silent truncation. */
export const PAYLOAD_LIMITS = {
  /** Tensors per payload. */
  maxTensors: 256,
  /** Dimensions per tensor shape. */
  maxRank: 8,
  /** Largest single dimension (elements). */
  maxDim: 2 ** 31 - 1,
  /** UTF-8 bytes of `metadata` serialised as JSON. */
  maxMetadataBytes: 64 * 1024,
  /** Nesting depth of `metadata` (the record itself is depth 1). */
  maxMetadataDepth: 16,
} as const;

/** The roles of a disaggregated pipeline (docs/design.md §9). */
export const StageRoleSchema = z.enum(['encode', 'denoise', 'decode']);
export type StageRole = z.infer<typeof StageRoleSchema>;

/** Element types a payload tensor may carry, with their size in bytes. Elements are little-endian. */
export const DTYPE_BYTES = { float32: 4, int32: 4, uint8: 1, bfloat16: 2 } as const;
export const PayloadDtypeSchema = z.enum(['float32', 'int32', 'uint8', 'bfloat16']);
export type PayloadDtype = z.infer<typeof PayloadDtypeSchema>;

/** A tensor name: a letter, then letters, digits and `_ . : / -`; at most 128 characters. */
export const TensorNameSchema = z.string().regex(/^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$/, 'a tensor name is a letter then up to 127 of [A-Za-z0-9_.:/-]');

/** One tensor of a payload: its element type, its shape, and its elements as raw little-endian bytes. */
export const PayloadTensorSchema = z.strictObject({
  dtype: PayloadDtypeSchema,
  shape: z.array(z.number().int().nonnegative().max(PAYLOAD_LIMITS.maxDim)).max(PAYLOAD_LIMITS.maxRank),
  bytes: z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'bytes must be a Uint8Array'),
});
export type PayloadTensor = z.infer<typeof PayloadTensorSchema>;

/** Why `value` is not plain JSON within the depth limit, or undefined when it is. `path` is a dotted path. */
function jsonProblem(value: unknown, path: string, depth: number): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path} is ${value}, which JSON cannot carry`;
  if (typeof value !== 'object') return `${path} is a ${typeof value}, which JSON cannot carry`;
  if (depth >= PAYLOAD_LIMITS.maxMetadataDepth) return `${path} nests deeper than ${PAYLOAD_LIMITS.maxMetadataDepth} levels`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = jsonProblem(value[i], `${path}.${i}`, depth + 1);
      if (p !== undefined) return p;
    }
    return undefined;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return `${path} is not a plain object (a ${(value as object).constructor?.name ?? 'class instance'})`;
  for (const [k, v] of Object.entries(value)) {
    if (k === '__proto__') return `${path} has a __proto__ key`;
    const p = jsonProblem(v, `${path}.${k}`, depth + 1);
    if (p !== undefined) return p;
  }
  return undefined;
}

/**
 * Family-defined metadata: a plain JSON record (finite numbers only, no `undefined`, no class instances), at most
 * `PAYLOAD_LIMITS.maxMetadataDepth` levels deep and `PAYLOAD_LIMITS.maxMetadataBytes` bytes as JSON.
 */
export const PayloadMetadataSchema = z.record(z.string(), z.unknown()).superRefine((m, ctx) => {
  const problem = jsonProblem(m, 'metadata', 0);
  if (problem !== undefined) {
    ctx.addIssue({ code: 'custom', message: problem });
    return;
  }
  const size = Buffer.byteLength(JSON.stringify(m));
  if (size > PAYLOAD_LIMITS.maxMetadataBytes)
    ctx.addIssue({ code: 'custom', message: `metadata is ${size} bytes as JSON, more than the ${PAYLOAD_LIMITS.maxMetadataBytes}-byte limit` });
});
export type PayloadMetadata = z.infer<typeof PayloadMetadataSchema>;

/** Bytes a tensor of `shape` and `dtype` occupies (shape product × dtype size). */
export function tensorByteLength(dtype: PayloadDtype, shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1) * DTYPE_BYTES[dtype];
}

/**
 * What crosses a stage boundary (docs/design.md §9): plain data only — tensors as bytes and JSON metadata, never live
 * objects. The runner and the transition processor treat `tensors` and `metadata` as opaque; only the model
 * family that wrote a `payloadType` reads it.
 */
export const DiffusionStagePayloadSchema = z
  .strictObject({
    schemaVersion: z.literal(PAYLOAD_SCHEMA_VERSION),
    requestId: z.string().min(1).max(128),
    /** The world session this payload belongs to; the Denoise stage reacquires its KV by it. */
    sessionId: z.string().min(1).max(128).optional(),
    sourceStage: StageRoleSchema,
    targetStage: StageRoleSchema,
    /** Family-defined kind, e.g. `wan.text_embeds`, `wan.latents_chunk`. */
    payloadType: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$/, 'a payload type is up to 128 of [A-Za-z0-9_.:/-]'),
    tensors: z.record(TensorNameSchema, PayloadTensorSchema).refine((t) => Object.keys(t).length <= PAYLOAD_LIMITS.maxTensors, {
      message: `more than ${PAYLOAD_LIMITS.maxTensors} tensors`,
    }),
    metadata: PayloadMetadataSchema,
  })
  .superRefine((p, ctx) => {
    for (const [name, t] of Object.entries(p.tensors)) {
      const want = tensorByteLength(t.dtype, t.shape);
      if (want !== t.bytes.length) {
        ctx.addIssue({
          code: 'custom',
          path: ['tensors', name, 'bytes'],
          message: `tensor "${name}" has shape [${t.shape.join(', ')}] of ${t.dtype}, which is ${want} bytes, but carries ${t.bytes.length} bytes`,
        });
      }
    }
  });
export type DiffusionStagePayload = z.infer<typeof DiffusionStagePayloadSchema>;

/** An OMNIRX_ERR_PAYLOAD. `byteOffset` is where in a frame (or stream) the problem was found, when it was. */
export class PayloadError extends OmniError {
  override readonly name = 'PayloadError';
  readonly byteOffset?: number;

  constructor(message: string, options: { byteOffset?: number; param?: string; cause?: unknown } = {}) {
    super('OMNIRX_ERR_PAYLOAD', message, options);
    if (options.byteOffset !== undefined) this.byteOffset = options.byteOffset;
  }
}

/**
 * Validates a payload (schema, limits, shape × dtype size === bytes for every tensor).
 * @throws PayloadError naming the first offending field as a dotted path; a newer `schemaVersion` is reported
 *   as such ("payload schema version 2 is newer than this omnirx (1)").
 */
export function parseStagePayload(input: unknown): DiffusionStagePayload {
  const version = (input as { schemaVersion?: unknown } | null)?.schemaVersion;
  if (typeof version === 'number' && version !== PAYLOAD_SCHEMA_VERSION) {
    const rel = version > PAYLOAD_SCHEMA_VERSION ? 'newer' : 'older';
    throw new PayloadError(`payload schema version ${version} is ${rel} than this omnirx (${PAYLOAD_SCHEMA_VERSION})`, { param: 'schemaVersion' });
  }
  const r = DiffusionStagePayloadSchema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.map(String).join('.');
  throw new PayloadError(`stage payload: ${field || '(root)'}: ${issue.message}`, { param: field || undefined });
}

/**
 * Wraps float32 elements as a payload tensor without copying: `bytes` is a view of `data`'s memory, so `data`
 * must stay unchanged (and a native tensor undisposed) until the payload has been put and the put resolved.
 * @throws PayloadError when `data.length` is not the product of `shape`.
 */
export function float32Tensor(data: Float32Array, shape: readonly number[]): PayloadTensor {
  const numel = shape.reduce((n, d) => n * d, 1);
  if (numel !== data.length) throw new PayloadError(`float32Tensor: ${data.length} elements given for shape [${shape.join(', ')}] (${numel} elements)`);
  return { dtype: 'float32', shape: [...shape], bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** Wraps a native tensor's elements as a payload tensor without copying (see `float32Tensor` for the lifetime rule). */
export function nativeTensorToPayload(t: NativeTensor): PayloadTensor {
  return float32Tensor(t.data, t.shape);
}

/**
 * The float32 elements of a payload tensor: a zero-copy view when its bytes are 4-byte aligned (frames decoded by
 * `decodePayload` are), else a copy.
 * @throws PayloadError when the tensor is not float32.
 */
export function float32Elements(t: PayloadTensor, name = 'tensor'): Float32Array {
  if (t.dtype !== 'float32') throw new PayloadError(`${name} is ${t.dtype}, not float32`, { param: name });
  const b = t.bytes;
  if (b.byteOffset % 4 === 0) return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  return new Float32Array(b.slice().buffer);
}

/**
 * Copies a received float32 payload tensor into a fresh native tensor (the payload's buffer may then be dropped).
 * @throws PayloadError when the tensor is not float32.
 */
export function payloadToNativeTensor(native: NativeBinding, t: PayloadTensor, name = 'tensor'): NativeTensor {
  return createTensor(native, t.shape, float32Elements(t, name));
}

/**
 * Payload types of the runtime's own messages between the front and the stages (docs/disaggregation.md): a request
 * entering Encode (its admitted job in `metadata.job`), its artifacts leaving Decode, and a failure travelling down to
 * the front. Between stages, families name their own payloads (e.g. `wan.text_embeds`).
 */
export const RUNTIME_PAYLOAD = {
  request: 'omnirx.request',
  outputs: 'omnirx.outputs',
  /** Decode → front, ahead of `outputs`: one progressively decoded piece of the request's video. */
  decodedChunk: 'omnirx.decoded_chunk',
  error: 'omnirx.stage_error',
} as const;

/**
 * Payload types of a world session's messages between the front and the stages. The front sends `open` (the admitted
 * session in `metadata.session`, the image as tensor `image`), `chunk` and `flush` (the latest action in
 * `metadata.action`) and `close`; Decode answers `ready` once every stage holds the session, `frames` per chunk
 * (tensor `frames`, `metadata` chunk, firstFrame, action) and `closed` once every stage has freed it.
 */
export const SESSION_PAYLOAD = {
  open: 'omnirx.session_open',
  chunk: 'omnirx.session_chunk',
  flush: 'omnirx.session_flush',
  close: 'omnirx.session_close',
  ready: 'omnirx.session_ready',
  frames: 'omnirx.session_frames',
  closed: 'omnirx.session_closed',
} as const;

/** A session payload: `requestId` names the message (`<sessionId>:<what>`), `sessionId` the session. */
export function sessionPayload(
  sessionId: string,
  requestId: string,
  source: StageRole,
  target: StageRole,
  payloadType: string,
  metadata: Record<string, unknown>,
  tensors: Record<string, PayloadTensor> = {},
): DiffusionStagePayload {
  return { schemaVersion: PAYLOAD_SCHEMA_VERSION, requestId, sessionId, sourceStage: source, targetStage: target, payloadType, tensors, metadata };
}

/**
 * Checks that payload tensor `name` exists with `dtype` and `shape` and returns it.
 * @throws PayloadError naming the tensor (`param` `tensors.<name>`) when it is missing or of another dtype or shape.
 */
export function expectTensor(t: PayloadTensor | undefined, name: string, dtype: PayloadTensor['dtype'], shape: readonly number[]): PayloadTensor {
  if (t === undefined) throw new PayloadError(`tensor "${name}" is missing`, { param: `tensors.${name}` });
  if (t.dtype !== dtype || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new PayloadError(`tensor "${name}" is ${t.dtype} [${t.shape.join(', ')}], expected ${dtype} [${shape.join(', ')}]`, { param: `tensors.${name}` });
  }
  return t;
}
