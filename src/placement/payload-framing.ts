import { crc32Function } from './crc32';
import {
  DTYPE_BYTES,
  PAYLOAD_LIMITS,
  PayloadDtypeSchema,
  PayloadError,
  parseStagePayload,
  tensorByteLength,
  type DiffusionStagePayload,
  type PayloadTensor,
} from '../pipeline/stage-payload';

/**
 * The wire framing of a `DiffusionStagePayload` (docs/disaggregation.md has the byte table). All integers are
 * little-endian. The first 16 bytes (magic, version, flags, total length) keep this layout in every framing
 * version, so a reader can always skip a whole frame it cannot read and keep the stream in sync.
 *
 * | bytes      | field                                                                      |
 * | ---------- | -------------------------------------------------------------------------- |
 * | 0..3       | magic `OMXP`                                                               |
 * | 4..5       | framing version (u16), 1                                                   |
 * | 6..7       | flags (u16), 0                                                             |
 * | 8..15      | total frame length in bytes (u64)                                          |
 * | 16..19     | header length H in bytes (u32)                                             |
 * | 20..23     | CRC-32 of bytes 0..19 then 24..end                                         |
 * | 24..24+H   | header: UTF-8 JSON, the payload without tensor bytes                        |
 * | ..B        | zero padding to B = the next multiple of 8                                 |
 * | B..end     | tensor bodies, each at an 8-aligned offset from B, zero-padded to 8 bytes  |
 */
export const FRAME_MAGIC = Uint8Array.of(0x4f, 0x4d, 0x58, 0x50); // 'OMXP'
export const FRAMING_VERSION = 1;
/** Bytes of the fixed header (magic to CRC). */
export const FIXED_HEADER_BYTES = 24;
/** Bytes every framing version keeps in place: magic, version, flags, total length. */
export const STABLE_PREFIX_BYTES = 16;
/** Largest JSON header accepted (bytes): metadata is capped at 64 KiB, tensor entries add at most ~80 KiB. */
export const MAX_HEADER_BYTES = 1024 * 1024;

const align8 = (n: number) => (n + 7) & ~7;
/** Zero bytes used for padding; never written to. */
const padding = (n: number) => new Uint8Array(n);

interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
  /** Offset from the body start, bytes (multiple of 8). */
  offset: number;
  /** Bytes. */
  length: number;
}

/**
 * Frames a payload as parts to write in order (fixed header + JSON header + padding, then each tensor's bytes and
 * its padding). Tensor bytes are not copied: the parts are views of the payload's tensors, so a socket or file can
 * take them with one gathered write. The payload is validated first.
 * @throws PayloadError when the payload is invalid.
 */
export function encodePayloadParts(payload: DiffusionStagePayload): Uint8Array[] {
  const p = parseStagePayload(payload);
  const entries: TensorEntry[] = [];
  const bodies: Uint8Array[] = [];
  let body = 0;
  for (const [name, t] of Object.entries(p.tensors)) {
    entries.push({ name, dtype: t.dtype, shape: t.shape, offset: body, length: t.bytes.length });
    bodies.push(t.bytes);
    body += align8(t.bytes.length);
  }
  const { tensors: _tensors, ...rest } = p;
  const header = Buffer.from(JSON.stringify({ ...rest, tensors: entries }), 'utf8');
  const bodyStart = align8(FIXED_HEADER_BYTES + header.length);
  const total = bodyStart + body;

  const head = new Uint8Array(bodyStart);
  const view = new DataView(head.buffer);
  head.set(FRAME_MAGIC, 0);
  view.setUint16(4, FRAMING_VERSION, true);
  view.setUint16(6, 0, true);
  view.setBigUint64(8, BigInt(total), true);
  view.setUint32(16, header.length, true);
  head.set(header, FIXED_HEADER_BYTES);

  const parts: Uint8Array[] = [head];
  for (const b of bodies) {
    parts.push(b);
    if (align8(b.length) !== b.length) parts.push(padding(align8(b.length) - b.length));
  }
  const crc = crc32Function();
  let c = crc(head.subarray(0, 20));
  c = crc(head.subarray(FIXED_HEADER_BYTES), c);
  for (let i = 1; i < parts.length; i++) c = crc(parts[i]!, c);
  view.setUint32(20, c, true);
  return parts;
}

/** Frames a payload into one contiguous buffer (`encodePayloadParts`, concatenated: one copy of the tensor bytes). */
export function encodePayload(payload: DiffusionStagePayload): Uint8Array {
  const parts = encodePayloadParts(payload);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The total frame length declared by a stable prefix (bytes 8..15), as a number (may exceed 2^53 as Infinity). */
function declaredLength(view: DataView): number {
  const total = view.getBigUint64(8, true);
  return total > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(total);
}

/** Checks the magic of `buf[0..n)`. @throws PayloadError naming the first wrong byte. */
function checkMagic(buf: Uint8Array, n: number, at: number): void {
  for (let i = 0; i < Math.min(n, 4); i++) {
    if (buf[i] !== FRAME_MAGIC[i]) {
      throw new PayloadError(
        `payload frame at byte ${at + i}: bad magic (expected "OMXP", got bytes ${[...buf.subarray(0, Math.min(n, 4))].map((b) => `0x${b.toString(16).padStart(2, '0')}`).join(' ')})`,
        { byteOffset: at + i },
      );
    }
  }
}

/** Validates one tensor entry of a decoded header. @throws PayloadError naming the tensor and the header offset. */
function checkEntry(e: unknown, i: number, bodyStart: number, total: number): TensorEntry {
  const where = `payload frame header (byte ${FIXED_HEADER_BYTES}): tensors.${i}`;
  const o = e as Partial<TensorEntry> | null;
  if (o === null || typeof o !== 'object' || typeof o.name !== 'string' || typeof o.dtype !== 'string' || !Array.isArray(o.shape)) {
    throw new PayloadError(`${where} is not { name, dtype, shape, offset, length }`, { byteOffset: FIXED_HEADER_BYTES });
  }
  if (!PayloadDtypeSchema.safeParse(o.dtype).success)
    throw new PayloadError(`${where} ("${o.name}") has unknown dtype ${JSON.stringify(o.dtype)}`, { byteOffset: FIXED_HEADER_BYTES });
  if (!Number.isSafeInteger(o.offset) || !Number.isSafeInteger(o.length) || o.offset! < 0 || o.length! < 0 || o.offset! % 8 !== 0) {
    throw new PayloadError(
      `${where} ("${o.name}") has offset ${o.offset} / length ${o.length}; both must be non-negative integers and the offset a multiple of 8`,
      { byteOffset: FIXED_HEADER_BYTES },
    );
  }
  const start = bodyStart + o.offset!;
  if (start + o.length! > total) {
    throw new PayloadError(`tensor "${o.name}" at byte ${start}: its ${o.length} bytes run past the frame end (byte ${total})`, { byteOffset: start });
  }
  if (!o.shape.every((d) => Number.isSafeInteger(d) && d >= 0 && d <= PAYLOAD_LIMITS.maxDim) || o.shape.length > PAYLOAD_LIMITS.maxRank) {
    throw new PayloadError(`${where} ("${o.name}") has an invalid shape ${JSON.stringify(o.shape)}`, { byteOffset: FIXED_HEADER_BYTES });
  }
  const want = tensorByteLength(o.dtype as keyof typeof DTYPE_BYTES, o.shape);
  if (want !== o.length) {
    throw new PayloadError(
      `tensor "${o.name}" at byte ${start}: shape [${o.shape.join(', ')}] of ${o.dtype} is ${want} bytes, but the frame gives it ${o.length} bytes`,
      { byteOffset: start },
    );
  }
  return o as TensorEntry;
}

/**
 * Decodes exactly one frame. Tensor bytes are zero-copy views into `buf` (8-aligned relative to the buffer start,
 * so float32 views need no copy when `buf` starts on an 8-byte boundary), so keep `buf` unchanged while they live.
 * @throws PayloadError naming the byte offset: bad magic, newer framing version, nonzero flags, truncated frame or
 *   header, header length past the end, trailing bytes, checksum mismatch, invalid JSON, tensor offsets out of range
 *   or overlapping, shape/bytes mismatch, or an invalid payload (newer schema version, bad field).
 */
export function decodePayload(buf: Uint8Array): DiffusionStagePayload {
  if (buf.length < FIXED_HEADER_BYTES) {
    checkMagic(buf, buf.length, 0);
    throw new PayloadError(`payload frame at byte ${buf.length}: truncated: ${buf.length} bytes, shorter than the ${FIXED_HEADER_BYTES}-byte fixed header`, {
      byteOffset: buf.length,
    });
  }
  checkMagic(buf, 4, 0);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const version = view.getUint16(4, true);
  if (version !== FRAMING_VERSION) {
    throw new PayloadError(
      `payload frame at byte 4: framing version ${version} is ${version > FRAMING_VERSION ? 'newer' : 'older'} than this omnirx (${FRAMING_VERSION})`,
      { byteOffset: 4 },
    );
  }
  const flags = view.getUint16(6, true);
  if (flags !== 0) throw new PayloadError(`payload frame at byte 6: unknown flags 0x${flags.toString(16)} (this omnirx knows none)`, { byteOffset: 6 });
  const total = declaredLength(view);
  if (total < FIXED_HEADER_BYTES)
    throw new PayloadError(`payload frame at byte 8: declares ${total} bytes, less than the ${FIXED_HEADER_BYTES}-byte fixed header`, { byteOffset: 8 });
  if (total > buf.length)
    throw new PayloadError(`payload frame at byte ${buf.length}: truncated: it declares ${total} bytes (at byte 8) but only ${buf.length} are present`, {
      byteOffset: buf.length,
    });
  if (total < buf.length)
    throw new PayloadError(`payload frame at byte ${total}: ${buf.length - total} bytes follow the end of the frame`, { byteOffset: total });
  const headerLength = view.getUint32(16, true);
  if (headerLength > MAX_HEADER_BYTES)
    throw new PayloadError(`payload frame at byte 16: header length ${headerLength} exceeds the ${MAX_HEADER_BYTES}-byte limit`, { byteOffset: 16 });
  const bodyStart = align8(FIXED_HEADER_BYTES + headerLength);
  if (bodyStart > total)
    throw new PayloadError(`payload frame at byte 16: header length ${headerLength} runs past the frame end (byte ${total})`, { byteOffset: 16 });

  const crc = crc32Function();
  const got = crc(buf.subarray(FIXED_HEADER_BYTES, total), crc(buf.subarray(0, 20)));
  const want = view.getUint32(20, true);
  if (got !== want)
    throw new PayloadError(`payload frame at byte 20: checksum mismatch (frame says 0x${want.toString(16)}, bytes give 0x${got.toString(16)})`, {
      byteOffset: 20,
    });

  let header: Record<string, unknown>;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(FIXED_HEADER_BYTES, FIXED_HEADER_BYTES + headerLength));
    header = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new PayloadError(`payload frame header at byte ${FIXED_HEADER_BYTES}: not valid UTF-8 JSON (${(e as Error).message})`, {
      byteOffset: FIXED_HEADER_BYTES,
      cause: e,
    });
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header) || !Array.isArray(header.tensors)) {
    throw new PayloadError(`payload frame header at byte ${FIXED_HEADER_BYTES}: not an object with a tensors array`, { byteOffset: FIXED_HEADER_BYTES });
  }
  if (header.tensors.length > PAYLOAD_LIMITS.maxTensors) {
    throw new PayloadError(`payload frame header at byte ${FIXED_HEADER_BYTES}: ${header.tensors.length} tensors, more than ${PAYLOAD_LIMITS.maxTensors}`, {
      byteOffset: FIXED_HEADER_BYTES,
    });
  }
  const entries = header.tensors.map((e, i) => checkEntry(e, i, bodyStart, total));
  const byOffset = [...entries].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < byOffset.length; i++) {
    const prev = byOffset[i - 1]!;
    const cur = byOffset[i]!;
    if (cur.offset < prev.offset + prev.length) {
      throw new PayloadError(
        `tensor "${cur.name}" at byte ${bodyStart + cur.offset} overlaps tensor "${prev.name}" (bytes ${bodyStart + prev.offset}..${bodyStart + prev.offset + prev.length})`,
        { byteOffset: bodyStart + cur.offset },
      );
    }
  }
  const tensors: Record<string, PayloadTensor> = {};
  for (const e of entries) {
    if (Object.hasOwn(tensors, e.name))
      throw new PayloadError(`payload frame header at byte ${FIXED_HEADER_BYTES}: tensor "${e.name}" appears twice`, { byteOffset: FIXED_HEADER_BYTES });
    const start = buf.byteOffset + bodyStart + e.offset;
    tensors[e.name] = { dtype: e.dtype as PayloadTensor['dtype'], shape: e.shape, bytes: new Uint8Array(buf.buffer, start, e.length) };
  }
  try {
    return parseStagePayload({ ...header, tensors });
  } catch (e) {
    const pe = e as PayloadError;
    throw new PayloadError(`payload frame header at byte ${FIXED_HEADER_BYTES}: ${pe.message}`, { byteOffset: FIXED_HEADER_BYTES, param: pe.param, cause: e });
  }
}

/** One frame read from a stream: its payload, or why that frame (and only it) was rejected. */
export type FrameResult = { ok: true; payload: DiffusionStagePayload; frameBytes: number } | { ok: false; error: PayloadError; frameBytes: number };

/**
 * Reassembles frames from a byte stream (TCP) cut at arbitrary points. Each complete frame is copied once into its
 * own buffer (tensor views are 8-aligned in it) and decoded.
 *
 * Two kinds of failure: a frame whose stable prefix is sound but whose content is not (newer version, checksum,
 * JSON, shape/bytes) is returned as a rejected `FrameResult` and the stream goes on with the next frame; a stream
 * that is out of sync (bad magic, a frame longer than `maxFrameBytes` or shorter than a header) makes `push` throw,
 * and the caller must drop the stream. A frame's declared length is checked before any of its body is buffered.
 */
export class PayloadFrameReader {
  readonly #maxFrameBytes: number;
  readonly #prefix = new Uint8Array(STABLE_PREFIX_BYTES);
  #prefixFill = 0;
  #frame: Uint8Array | null = null;
  #frameFill = 0;
  /** Stream offset of the current frame's first byte. */
  #frameStart = 0;

  /** @param maxFrameBytes largest frame accepted, bytes (at least the 24-byte fixed header). */
  constructor(maxFrameBytes: number) {
    if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < FIXED_HEADER_BYTES)
      throw new RangeError(`PayloadFrameReader: maxFrameBytes must be an integer ≥ ${FIXED_HEADER_BYTES}, got ${maxFrameBytes}`);
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** Bytes received but not yet returned as a frame. */
  get bufferedBytes(): number {
    return this.#frame === null ? this.#prefixFill : this.#frameFill;
  }

  /**
   * Feeds the next bytes of the stream.
   * @returns the frames completed by this chunk, in stream order.
   * @throws PayloadError (stream out of sync) naming the stream byte offset.
   */
  push(chunk: Uint8Array): FrameResult[] {
    const out: FrameResult[] = [];
    let pos = 0;
    while (pos < chunk.length) {
      if (this.#frame === null) {
        const n = Math.min(STABLE_PREFIX_BYTES - this.#prefixFill, chunk.length - pos);
        this.#prefix.set(chunk.subarray(pos, pos + n), this.#prefixFill);
        this.#prefixFill += n;
        pos += n;
        checkMagic(this.#prefix, this.#prefixFill, this.#frameStart);
        if (this.#prefixFill < STABLE_PREFIX_BYTES) break;
        const total = declaredLength(new DataView(this.#prefix.buffer));
        if (total > this.#maxFrameBytes) {
          throw new PayloadError(`payload stream at byte ${this.#frameStart + 8}: a frame of ${total} bytes exceeds the ${this.#maxFrameBytes}-byte limit`, {
            byteOffset: this.#frameStart + 8,
          });
        }
        if (total < FIXED_HEADER_BYTES) {
          throw new PayloadError(
            `payload stream at byte ${this.#frameStart + 8}: a frame declares ${total} bytes, less than the ${FIXED_HEADER_BYTES}-byte fixed header`,
            { byteOffset: this.#frameStart + 8 },
          );
        }
        this.#frame = new Uint8Array(total);
        this.#frame.set(this.#prefix);
        this.#frameFill = STABLE_PREFIX_BYTES;
        this.#prefixFill = 0;
      }
      const frame = this.#frame;
      const n = Math.min(frame.length - this.#frameFill, chunk.length - pos);
      frame.set(chunk.subarray(pos, pos + n), this.#frameFill);
      this.#frameFill += n;
      pos += n;
      if (this.#frameFill < frame.length) break;
      out.push(this.#decode(frame));
      this.#frameStart += frame.length;
      this.#frame = null;
      this.#frameFill = 0;
    }
    return out;
  }

  /** Declares the end of the stream. @throws PayloadError when it ends inside a frame (truncated frame). */
  end(): void {
    const have = this.bufferedBytes;
    if (have === 0) return;
    const of = this.#frame === null ? 'a frame prefix' : `a frame of ${this.#frame.length} bytes`;
    throw new PayloadError(
      `payload stream at byte ${this.#frameStart + have}: truncated: the stream ended ${have} bytes into ${of} (starting at byte ${this.#frameStart})`,
      { byteOffset: this.#frameStart + have },
    );
  }

  #decode(frame: Uint8Array): FrameResult {
    try {
      return { ok: true, payload: decodePayload(frame), frameBytes: frame.length };
    } catch (e) {
      if (!(e instanceof PayloadError)) throw e;
      const at = this.#frameStart + (e.byteOffset ?? 0);
      return {
        ok: false,
        error: new PayloadError(`frame at stream byte ${this.#frameStart}: ${e.message}`, { byteOffset: at, param: e.param, cause: e }),
        frameBytes: frame.length,
      };
    }
  }
}
