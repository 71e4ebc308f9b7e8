/**
 * Reader and writer for the safetensors weight format.
 *
 * Format: https://github.com/huggingface/safetensors
 *
 *   [0, 8)        N: little-endian u64, length of the JSON header in bytes
 *   [8, 8+N)      UTF-8 JSON object: tensor name -> {dtype, shape, data_offsets}
 *                 plus an optional "__metadata__" object of string -> string
 *   [8+N, EOF)    data buffer; data_offsets are [begin, end) relative to its start
 *
 * The parser treats every byte as hostile: every length is checked against
 * the bytes actually present before it is used, nothing is allocated from an
 * unchecked length, and every problem is reported as a {@link SafetensorsError}
 * naming the tensor and the absolute byte offset in the file.
 *
 * Dtypes: omnirx loads F32, F16 and BF16 tensors (widened to float32). Real
 * checkpoints also carry tensors of other dtypes (e.g. the I64
 * `position_ids` buffer of CLIP text encoders), so the other dtypes the
 * format defines (BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F64, C64,
 * F8_E4M3, F8_E5M2, F8_E8M0) are *accepted and fully validated* (size,
 * bounds, overlap) but are not part of {@link SafetensorsFile.entries} and
 * `has()` returns false for them; `float32()` on one throws a
 * SafetensorsError naming its dtype. A dtype outside both lists (including
 * the sub-byte F4/F6 types, whose byte sizes are not whole) rejects the file.
 */
import { open, rename, unlink, writeFile } from 'node:fs/promises';
import { constants as bufferConstants } from 'node:buffer';

import { SafetensorsError, quoteTensorName } from './safetensors-error';

export { SafetensorsError } from './safetensors-error';

/** Dtypes omnirx loads (and writes). */
export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';

/** One loadable (F32/F16/BF16) tensor of a safetensors file. */
export interface SafetensorsEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** absolute byte offset of the tensor's first byte in the file */
  byteOffset: number;
  byteLength: number;
}

/** A parsed safetensors file. */
export interface SafetensorsFile {
  /**
   * Loadable (F32/F16/BF16) entries in file order, i.e. ordered by their
   * byte offset in the file (ties keep header order).
   */
  entries: SafetensorsEntry[];
  /** The `__metadata__` object; empty when absent. */
  metadata: Record<string, string>;
  /**
   * Returns a fresh, aligned copy of the tensor widened to float32 (F16/BF16
   * converted exactly; NaN payloads kept). Throws SafetensorsError naming the
   * tensor if it is absent, or naming its dtype if it is not F32/F16/BF16.
   */
  float32(name: string): Float32Array;
  /** True when the file holds a loadable (F32/F16/BF16) tensor of that name. */
  has(name: string): boolean;
  /**
   * The dtype the header gives tensor `name` (any dtype of the format: loadable or not), or undefined when the file
   * holds no tensor of that name.
   */
  dtypeOf(name: string): string | undefined;
  /**
   * The first element of the loadable (F32/F16/BF16) tensor `name` that is NaN or ±Infinity, as its row-major index
   * and its value (NaN, Infinity or -Infinity); undefined when every element is finite. One pass over the tensor's
   * bits in the file: nothing is converted or copied. Throws SafetensorsError as `float32()` does for a tensor that
   * is absent or not F32/F16/BF16.
   */
  findNonFinite(name: string): { index: number; value: number } | undefined;
}

/** Input for the writer: one tensor, float32 values in row-major order. */
type TensorInput = { shape: number[]; data: Float32Array; dtype?: SafetensorsDtype };

/** Largest header accepted, in bytes (the reference implementation's cap). */
const MAX_HEADER_BYTES = 100_000_000;
const HEADER_START = 8;
const METADATA_KEY = '__metadata__';

const FLOAT_DTYPE_SIZES: ReadonlyMap<string, number> = new Map([
  ['F32', 4],
  ['F16', 2],
  ['BF16', 2],
]);

/** Other dtypes of the format: validated but not loadable as float32. */
const OTHER_DTYPE_SIZES: ReadonlyMap<string, number> = new Map([
  ['F64', 8],
  ['C64', 8],
  ['I64', 8],
  ['U64', 8],
  ['I32', 4],
  ['U32', 4],
  ['I16', 2],
  ['U16', 2],
  ['I8', 1],
  ['U8', 1],
  ['BOOL', 1],
  ['F8_E4M3', 1],
  ['F8_E5M2', 1],
  ['F8_E8M0', 1],
]);

const FLOAT_DTYPES_TEXT = [...FLOAT_DTYPE_SIZES.keys()].join(', ');
const ALL_DTYPES_TEXT = [...FLOAT_DTYPE_SIZES.keys(), ...OTHER_DTYPE_SIZES.keys()].join(', ');

interface RawEntry {
  name: string;
  dtype: string;
  shape: number[];
  /** relative to the data buffer */
  begin: number;
  end: number;
  headerIndex: number;
}

/** Render a JSON value from the header compactly and safely for a message. */
function show(value: unknown, max = 80): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Index of the first byte that makes `bytes` invalid UTF-8, or -1. */
function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  const n = bytes.length;
  while (i < n) {
    const b0 = bytes[i]!;
    if (b0 < 0x80) {
      i += 1;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) need = 1;
    else if (b0 >= 0xe0 && b0 <= 0xef) {
      need = 2;
      if (b0 === 0xe0) lo = 0xa0;
      if (b0 === 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      need = 3;
      if (b0 === 0xf0) lo = 0x90;
      if (b0 === 0xf4) hi = 0x8f;
    } else return i;
    for (let k = 1; k <= need; k++) {
      if (i + k >= n) return i;
      const b = bytes[i + k]!;
      if (k === 1 ? b < lo || b > hi : b < 0x80 || b > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Half-precision conversions (bit-exact, host-endianness independent)

let f16ToF32Table: Uint32Array | undefined;

/** float32 bit pattern of every float16 bit pattern (exact: subnormals, ±inf, NaN payloads). */
function f16Table(): Uint32Array {
  if (f16ToF32Table) return f16ToF32Table;
  const table = new Uint32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exp = (h >>> 10) & 0x1f;
    let mant = h & 0x3ff;
    let bits: number;
    if (exp === 0x1f) {
      bits = sign | 0x7f800000 | (mant << 13); // inf / NaN (payload kept)
    } else if (exp !== 0) {
      bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    } else if (mant === 0) {
      bits = sign; // ±0
    } else {
      // subnormal: value = mant * 2^-24; normalise into an f32 normal
      let e = -14;
      while ((mant & 0x400) === 0) {
        mant <<= 1;
        e -= 1;
      }
      bits = sign | ((e + 127) << 23) | ((mant & 0x3ff) << 13);
    }
    table[h] = bits >>> 0;
  }
  f16ToF32Table = table;
  return table;
}

/** float32 bit pattern -> float16 bit pattern, round to nearest, ties to even. */
function f32BitsToF16(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) {
    // inf stays inf; NaN stays a (quiet) NaN, keeping the top payload bits
    return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13);
  }
  const e = exp - 127 + 15; // biased half exponent
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> ±inf
  if (e <= 0) {
    // half subnormal (or zero): half = mant24 * 2^(e-14)
    if (e < -10) return sign; // |x| < 2^-25 rounds to ±0
    mant |= 0x800000;
    const shift = 14 - e; // 14..24
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) === 1)) half += 1;
    return sign | half; // a carry into 0x400 is the smallest normal: correct
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half += 1; // carry may give inf: correct
  return sign | half;
}

/** float32 bit pattern -> bfloat16 bit pattern, round to nearest, ties to even. */
function f32BitsToBf16(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) {
    return ((bits >>> 16) | 0x40) & 0xffff; // quiet NaN, sign and top payload kept
  }
  // bits <= 0xff800000 here, so the sum stays below 2^32
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// ---------------------------------------------------------------------------
// Parsing

/**
 * Parse a complete safetensors file held in memory.
 *
 * Format: https://github.com/huggingface/safetensors. All sizes and offsets
 * are in bytes; `SafetensorsEntry.byteOffset` is absolute within `bytes`.
 * The returned object reads tensor data lazily from `bytes` (no copy is made
 * until `float32()` is called), so `bytes` must not be modified afterwards.
 *
 * @param bytes  the whole file
 * @param source file path (or other label) used as the prefix of error messages
 * @throws SafetensorsError (with `source`, and `tensor`/`offset` where they
 *   apply) when the file is shorter than 8 bytes; the header length is 0,
 *   larger than the file, or over 100,000,000 bytes; the header is not UTF-8
 *   JSON describing an object; an entry is not an object, has an unknown
 *   dtype, a shape that is not an array of non-negative safe integers (or
 *   whose element count or byte size exceeds 2^53-1), data_offsets that are
 *   not two non-negative integers with begin <= end, a byte length different
 *   from product(shape) x dtype size, or data outside the data buffer; two
 *   tensors overlap (holes between tensors are allowed); or `__metadata__` is
 *   not an object of strings. No other exception type is thrown.
 */
export function parseSafetensors(bytes: Uint8Array, source?: string): SafetensorsFile {
  const fail = (detail: string, tensor?: string, offset?: number, cause?: unknown): never => {
    throw new SafetensorsError(detail, { source, tensor, offset, cause });
  };
  if (!(bytes instanceof Uint8Array)) fail('expected the file contents as a Uint8Array');

  const fileSize = bytes.byteLength;
  if (fileSize < HEADER_START) {
    fail(`file is ${fileSize} bytes, shorter than the 8-byte header length field`, undefined, 0);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lenLo = view.getUint32(0, true);
  const lenHi = view.getUint32(4, true);
  // exact as a double up to 2^53; above that it is far beyond any cap anyway
  const headerLen = lenHi * 0x1_0000_0000 + lenLo;
  if (headerLen === 0) fail('header length (bytes 0-7) is 0; expected a JSON header', undefined, 0);
  if (headerLen > MAX_HEADER_BYTES) {
    // The length is not shown: above the cap it is most likely the first 8 bytes of some other file's content.
    fail(`not a safetensors file: the header length (bytes 0-7) is over the ${MAX_HEADER_BYTES}-byte cap`, undefined, 0);
  }
  if (headerLen > fileSize - HEADER_START) {
    fail(
      `header length (bytes 0-7) is ${headerLen} bytes but only ${fileSize - HEADER_START} bytes follow ` +
        `the length field (file is ${fileSize} bytes; truncated?)`,
      undefined,
      0,
    );
  }
  const dataStart = HEADER_START + headerLen;
  const dataLen = fileSize - dataStart;
  const headerBytes = bytes.subarray(HEADER_START, dataStart);

  let headerText = '';
  try {
    headerText = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(headerBytes);
  } catch (err) {
    const bad = firstInvalidUtf8(headerBytes);
    const at = bad >= 0 ? HEADER_START + bad : HEADER_START;
    fail(`header is not valid UTF-8 (at byte ${at})`, undefined, at, err);
  }

  let header: unknown;
  try {
    header = JSON.parse(headerText);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const pos = /at position (\d+)/.exec(message);
    let at = HEADER_START;
    if (pos) {
      const charPos = Math.min(Number(pos[1]), headerText.length);
      at = HEADER_START + Buffer.byteLength(headerText.slice(0, charPos), 'utf8');
    }
    // The parser's message quotes the text around the error: only the position is shown, the cause keeps the rest.
    fail(`header (bytes 8-${dataStart - 1}) is not valid JSON (at byte ${at})`, undefined, at, err);
  }
  if (!isPlainObject(header)) {
    const kind = header === null ? 'null' : Array.isArray(header) ? 'an array' : `a ${typeof header}`;
    fail(`header must be a JSON object, got ${kind} (header at byte 8)`, undefined, HEADER_START);
  }
  const headerObj = header as Record<string, unknown>;

  // __metadata__
  const metaPairs: Array<[string, string]> = [];
  if (Object.prototype.hasOwnProperty.call(headerObj, METADATA_KEY)) {
    const meta = headerObj[METADATA_KEY];
    if (!isPlainObject(meta)) {
      fail(`"__metadata__" must be an object of strings, got ${show(meta)} (header at byte 8)`, undefined, HEADER_START);
    }
    for (const [key, value] of Object.entries(meta as Record<string, unknown>)) {
      if (typeof value !== 'string') {
        fail(
          `"__metadata__" value for key ${quoteTensorName(key)} must be a string, got ${show(value)} (header at byte 8)`,
          undefined,
          HEADER_START,
        );
      }
      metaPairs.push([key, value as string]);
    }
  }

  // tensor entries
  const raw: RawEntry[] = [];
  let headerIndex = 0;
  for (const [name, value] of Object.entries(headerObj)) {
    if (name === METADATA_KEY) continue;
    const where = '(header at byte 8)';
    if (!isPlainObject(value)) {
      fail(`entry must be an object with dtype, shape and data_offsets, got ${show(value)} ${where}`, name, HEADER_START);
    }
    const entry = value as Record<string, unknown>;

    const dtype = entry['dtype'];
    if (typeof dtype !== 'string') {
      fail(`dtype must be a string, got ${show(dtype)}; allowed: ${ALL_DTYPES_TEXT} ${where}`, name, HEADER_START);
    }
    const dtypeStr = dtype as string;
    const dtypeSize = FLOAT_DTYPE_SIZES.get(dtypeStr) ?? OTHER_DTYPE_SIZES.get(dtypeStr);
    if (dtypeSize === undefined) {
      fail(`unknown dtype ${show(dtypeStr)}; allowed: ${ALL_DTYPES_TEXT} ${where}`, name, HEADER_START);
    }

    const shapeValue = entry['shape'];
    if (!Array.isArray(shapeValue)) {
      fail(`shape must be an array of non-negative integers, got ${show(shapeValue)} ${where}`, name, HEADER_START);
    }
    const shape: number[] = [];
    let numel = 1;
    for (const dim of shapeValue as unknown[]) {
      if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
        fail(
          `shape must be an array of non-negative safe integers, got ${show(shapeValue)} (bad dimension ${show(dim)}) ${where}`,
          name,
          HEADER_START,
        );
      }
      const d = (dim as number) === 0 ? 0 : (dim as number); // normalise -0
      shape.push(d);
      numel *= d;
      if (numel > Number.MAX_SAFE_INTEGER) {
        fail(`shape ${show(shapeValue)} has more than 2^53-1 elements ${where}`, name, HEADER_START);
      }
    }
    const needBytes = numel * dtypeSize!;
    if (needBytes > Number.MAX_SAFE_INTEGER) {
      fail(`shape ${show(shapeValue)} of dtype ${dtypeStr} needs more than 2^53-1 bytes ${where}`, name, HEADER_START);
    }

    const offsets = entry['data_offsets'];
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every((o) => typeof o === 'number' && Number.isSafeInteger(o) && o >= 0)
    ) {
      fail(`data_offsets must be two non-negative integers [begin, end], got ${show(offsets)} ${where}`, name, HEADER_START);
    }
    const begin = (offsets as number[])[0]! + 0; // + 0 normalises -0
    const end = (offsets as number[])[1]! + 0;
    if (begin > end) fail(`data_offsets [${begin}, ${end}] have begin > end ${where}`, name, HEADER_START);
    const haveBytes = end - begin;
    if (haveBytes !== needBytes) {
      fail(
        `data_offsets [${begin}, ${end}] give ${haveBytes} bytes but dtype ${dtypeStr} × shape [${shape.join(',')}] ` +
          `needs ${needBytes} ${where}`,
        name,
        HEADER_START,
      );
    }
    if (end > dataLen) {
      // exact even when dataStart + offset exceeds 2^53
      const absBegin = BigInt(dataStart) + BigInt(begin);
      const absEnd = BigInt(dataStart) + BigInt(end);
      fail(
        `data_offsets [${begin}, ${end}] span bytes [${absBegin}, ${absEnd}) of the file but the data ` +
          `buffer (starting at byte ${dataStart}) holds ${dataLen} bytes, so the file ends at byte ${fileSize}`,
        name,
        // the tensor's first byte, or the end of the file when it starts beyond it
        Math.min(dataStart + begin, fileSize),
      );
    }
    raw.push({ name, dtype: dtypeStr, shape, begin, end, headerIndex: headerIndex++ });
  }

  // file order, then reject overlapping (non-empty) tensors; holes are allowed
  raw.sort((a, b) => a.begin - b.begin || a.end - b.end || a.headerIndex - b.headerIndex);
  let reach: RawEntry | undefined; // non-empty tensor whose data reaches furthest so far
  for (const r of raw) {
    if (r.end === r.begin) continue;
    if (reach && r.begin < reach.end) {
      fail(
        `data_offsets [${r.begin}, ${r.end}] overlap tensor ${quoteTensorName(reach.name)} ` +
          `[${reach.begin}, ${reach.end}]: bytes [${dataStart + r.begin}, ${dataStart + Math.min(r.end, reach.end)}) ` +
          `of the file are shared (overlap starts at byte ${dataStart + r.begin})`,
        r.name,
        dataStart + r.begin,
      );
    }
    if (!reach || r.end > reach.end) reach = r;
  }

  const entries: SafetensorsEntry[] = [];
  const loadable = new Map<string, SafetensorsEntry>();
  const other = new Map<string, RawEntry>();
  for (const r of raw) {
    if (FLOAT_DTYPE_SIZES.has(r.dtype)) {
      const e: SafetensorsEntry = {
        name: r.name,
        dtype: r.dtype as SafetensorsDtype,
        shape: r.shape,
        byteOffset: dataStart + r.begin,
        byteLength: r.end - r.begin,
      };
      entries.push(e);
      loadable.set(r.name, e);
    } else {
      other.set(r.name, r);
    }
  }
  const metadata: Record<string, string> = Object.fromEntries(metaPairs);

  const loadableEntry = (name: string): SafetensorsEntry => {
    const e = loadable.get(name);
    if (!e) {
      const o = other.get(name);
      if (o) {
        fail(
          `dtype ${o.dtype} cannot be loaded as float32 (supported: ${FLOAT_DTYPES_TEXT}); ` +
            `tensor data at byte ${dataStart + o.begin}`,
          name,
          dataStart + o.begin,
        );
      }
      fail(`no such tensor in the file (${loadable.size + other.size} tensors present)`, name);
    }
    return e!;
  };

  return {
    entries,
    metadata,
    float32: (name: string) => widen(bytes, view, loadableEntry(name)),
    has: (name: string) => loadable.has(name),
    dtypeOf: (name: string) => loadable.get(name)?.dtype ?? other.get(name)?.dtype,
    findNonFinite: (name: string) => findNonFinite(bytes, view, loadableEntry(name)),
  };
}

/**
 * The first NaN or ±Infinity of one validated tensor, read from its bits: an element is non-finite when its exponent
 * bits are all ones (F32 0x7f800000, F16 0x7c00, BF16 0x7f80); it is NaN when its mantissa is not zero as well.
 */
function findNonFinite(bytes: Uint8Array, view: DataView, e: SafetensorsEntry): { index: number; value: number } | undefined {
  const wide = e.dtype === 'F32';
  const size = wide ? 4 : 2;
  const n = e.byteLength / size;
  const exponent = wide ? 0x7f800000 : e.dtype === 'F16' ? 0x7c00 : 0x7f80;
  const signBit = wide ? 0x80000000 : 0x8000;
  const found = (index: number, bits: number) => ({
    index,
    value: (bits & ~signBit & ~exponent) !== 0 ? Number.NaN : (bits & signBit) !== 0 ? -Infinity : Infinity,
  });
  const start = bytes.byteOffset + e.byteOffset;
  if (HOST_LITTLE_ENDIAN && start % size === 0) {
    // An aligned view reads the file's little-endian words directly: the fast path for files the writer made.
    const words = wide ? new Uint32Array(bytes.buffer, start, n) : new Uint16Array(bytes.buffer, start, n);
    for (let i = 0; i < n; i++) if ((words[i]! & exponent) === exponent) return found(i, words[i]!);
    return undefined;
  }
  for (let i = 0; i < n; i++) {
    const bits = wide ? view.getUint32(e.byteOffset + 4 * i, true) : view.getUint16(e.byteOffset + 2 * i, true);
    if ((bits & exponent) === exponent) return found(i, bits);
  }
  return undefined;
}

/** Copy one validated tensor out of the file as float32, little-endian, alignment-safe. */
function widen(bytes: Uint8Array, view: DataView, e: SafetensorsEntry): Float32Array {
  const off = e.byteOffset;
  if (e.dtype === 'F32') {
    const n = e.byteLength / 4;
    const out = new Float32Array(n);
    if (HOST_LITTLE_ENDIAN) {
      // byte copy into a fresh (aligned) buffer; works for any source alignment
      new Uint8Array(out.buffer).set(bytes.subarray(off, off + e.byteLength));
    } else {
      const outBits = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) outBits[i] = view.getUint32(off + 4 * i, true);
    }
    return out;
  }
  const n = e.byteLength / 2;
  const out = new Float32Array(n);
  const outBits = new Uint32Array(out.buffer); // bit patterns keep NaN payloads
  if (e.dtype === 'F16') {
    const table = f16Table();
    for (let i = 0; i < n; i++) outBits[i] = table[view.getUint16(off + 2 * i, true)]!;
  } else {
    for (let i = 0; i < n; i++) outBits[i] = view.getUint16(off + 2 * i, true) << 16;
  }
  return out;
}

/**
 * Read and parse a safetensors file from disk.
 *
 * Format: https://github.com/huggingface/safetensors. The whole file is read
 * into memory (sizes in bytes); files larger than `buffer.constants.MAX_LENGTH`
 * bytes are rejected.
 *
 * @param path file path
 * @param source how errors name the file (default `path`); a server passes a
 *   name without its own folders, as errors may reach clients
 * @throws SafetensorsError for every content problem listed on
 *   {@link parseSafetensors}, for a file too large to hold in memory, or a
 *   file that shrinks while being read. File-system errors (ENOENT, EACCES,
 *   ...) are passed through unchanged.
 */
export async function readSafetensors(path: string, source = path): Promise<SafetensorsFile> {
  const handle = await open(path, 'r');
  let bytes: Buffer;
  try {
    const { size } = await handle.stat();
    if (size > bufferConstants.MAX_LENGTH) {
      throw new SafetensorsError(
        `file is ${size} bytes, larger than the ${bufferConstants.MAX_LENGTH} bytes a Buffer can hold`,
        { source },
      );
    }
    bytes = Buffer.allocUnsafe(size);
    let filled = 0;
    const CHUNK = 1 << 30;
    while (filled < size) {
      const { bytesRead } = await handle.read(bytes, filled, Math.min(CHUNK, size - filled), filled);
      if (bytesRead === 0) {
        throw new SafetensorsError(`file ended at byte ${filled} while reading; expected ${size} bytes`, {
          source,
          offset: filled,
        });
      }
      filled += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return parseSafetensors(bytes, source);
}

/**
 * Serialize float32 tensors to safetensors bytes.
 *
 * Format: https://github.com/huggingface/safetensors. Each tensor is stored
 * as `dtype` (default F32); F16 and BF16 are produced with
 * round-to-nearest-even (values beyond the F16 range become ±Infinity, NaN
 * stays NaN). The header is padded with spaces so the data buffer starts at a
 * multiple of 8 bytes, and tensors are laid out contiguously, widest dtype
 * first (stable otherwise), so every tensor is aligned to its element size.
 *
 * @param tensors  name -> {shape, data (row-major float32), dtype?}
 * @param metadata optional `__metadata__` (string -> string)
 * @returns the file contents
 * @throws SafetensorsError (with `tensor` set) when a name is
 *   "__metadata__", a dtype is not F32/F16/BF16, a shape is not an array of
 *   non-negative safe integers, `data` is not a Float32Array or its length is
 *   not product(shape), a metadata value is not a string, or the result would
 *   be too large to allocate.
 */
export function serializeSafetensors(
  tensors: Record<string, TensorInput>,
  metadata?: Record<string, string>,
): Uint8Array {
  const fail = (detail: string, tensor?: string): never => {
    throw new SafetensorsError(detail, { tensor });
  };
  if (!isPlainObject(tensors)) fail('tensors must be an object of name -> {shape, data, dtype?}');

  interface Planned {
    name: string;
    dtype: SafetensorsDtype;
    shape: number[];
    data: Float32Array;
    size: number;
    index: number;
  }
  const planned: Planned[] = [];
  let index = 0;
  for (const [name, t] of Object.entries(tensors)) {
    if (name === METADATA_KEY) fail('"__metadata__" is reserved and cannot name a tensor', name);
    if (!isPlainObject(t)) fail('tensor must be an object {shape, data, dtype?}', name);
    const dtype = t.dtype ?? 'F32';
    const size = FLOAT_DTYPE_SIZES.get(dtype);
    if (size === undefined) fail(`dtype ${show(dtype)} cannot be written; allowed: ${FLOAT_DTYPES_TEXT}`, name);
    if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`shape must be an array of non-negative safe integers, got ${show(t.shape)}`, name);
    }
    if (!(t.data instanceof Float32Array)) fail('data must be a Float32Array', name);
    let numel = 1;
    for (const d of t.shape) {
      numel *= d;
      if (numel > Number.MAX_SAFE_INTEGER) fail(`shape ${show(t.shape)} has more than 2^53-1 elements`, name);
    }
    if (numel !== t.data.length) {
      fail(`shape [${t.shape.join(',')}] has ${numel} elements but data has ${t.data.length}`, name);
    }
    planned.push({ name, dtype, shape: t.shape.map((d) => d + 0), data: t.data, size: size!, index: index++ });
  }
  planned.sort((a, b) => b.size - a.size || a.index - b.index);

  const metaPairs: Array<[string, string]> = [];
  if (metadata !== undefined) {
    if (!isPlainObject(metadata)) fail('metadata must be an object of strings');
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== 'string') fail(`metadata value for key ${quoteTensorName(k)} must be a string, got ${show(v)}`);
      metaPairs.push([k, v]);
    }
  }

  const parts: string[] = [];
  if (metaPairs.length > 0) {
    const meta = metaPairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',');
    parts.push(`${JSON.stringify(METADATA_KEY)}:{${meta}}`);
  }
  let cursor = 0;
  const layout: number[] = [];
  for (const p of planned) {
    const begin = cursor;
    cursor += p.data.length * p.size;
    layout.push(begin);
    parts.push(
      `${JSON.stringify(p.name)}:{"dtype":"${p.dtype}","shape":[${p.shape.join(',')}],` +
        `"data_offsets":[${begin},${cursor}]}`,
    );
  }
  const headerRaw = Buffer.from(`{${parts.join(',')}}`, 'utf8');
  const headerLen = Math.ceil(headerRaw.length / 8) * 8;
  if (headerLen > MAX_HEADER_BYTES) fail(`header would be ${headerLen} bytes, over the ${MAX_HEADER_BYTES}-byte cap`);
  const total = HEADER_START + headerLen + cursor;

  let out: Uint8Array;
  try {
    out = new Uint8Array(total);
  } catch (err) {
    throw new SafetensorsError(`cannot allocate ${total} bytes for the file`, { cause: err });
  }
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setUint32(0, headerLen >>> 0, true);
  view.setUint32(4, Math.floor(headerLen / 0x1_0000_0000), true);
  out.set(headerRaw, HEADER_START);
  out.fill(0x20, HEADER_START + headerRaw.length, HEADER_START + headerLen);

  const dataStart = HEADER_START + headerLen;
  planned.forEach((p, i) => {
    const base = dataStart + layout[i]!;
    const bits = new Uint32Array(p.data.buffer, p.data.byteOffset, p.data.length);
    const n = bits.length;
    if (p.dtype === 'F32') {
      for (let j = 0; j < n; j++) view.setUint32(base + 4 * j, bits[j]!, true);
    } else if (p.dtype === 'F16') {
      for (let j = 0; j < n; j++) view.setUint16(base + 2 * j, f32BitsToF16(bits[j]!), true);
    } else {
      for (let j = 0; j < n; j++) view.setUint16(base + 2 * j, f32BitsToBf16(bits[j]!), true);
    }
  });
  return out;
}

let tmpCounter = 0;

/**
 * Serialize tensors (see {@link serializeSafetensors}) and write them to
 * `path`. The bytes go to a temporary file beside `path` that is then
 * renamed over it, so readers never see a partly written file.
 *
 * Format: https://github.com/huggingface/safetensors (sizes in bytes).
 *
 * @throws SafetensorsError for invalid tensors or metadata (nothing is
 *   written); file-system errors are passed through unchanged.
 */
export async function writeSafetensors(
  path: string,
  tensors: Record<string, TensorInput>,
  metadata?: Record<string, string>,
): Promise<void> {
  const bytes = serializeSafetensors(tensors, metadata);
  const tmp = `${path}.${process.pid}.${Date.now()}.${tmpCounter++}.tmp`;
  try {
    await writeFile(tmp, bytes);
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}
