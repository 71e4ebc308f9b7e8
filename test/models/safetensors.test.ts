import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  SafetensorsError,
  parseSafetensors,
  readSafetensors,
  serializeSafetensors,
  writeSafetensors,
  type SafetensorsDtype,
} from '../../src/models/weights/safetensors';
import { prng } from '../helpers/prng';

// ---------------------------------------------------------------------------
// helpers


/** Assemble a file by hand: u64 header length (or an explicit one), header, data. */
function rawFile(header: unknown, data: Uint8Array | number = 0, headerLen?: bigint): Uint8Array {
  const text = typeof header === 'string' ? header : JSON.stringify(header);
  return rawFileBytes(Buffer.from(text, 'utf8'), data, headerLen);
}

function rawFileBytes(headerBytes: Uint8Array, data: Uint8Array | number = 0, headerLen?: bigint): Uint8Array {
  const dataBytes = typeof data === 'number' ? new Uint8Array(data) : data;
  const out = new Uint8Array(8 + headerBytes.length + dataBytes.length);
  new DataView(out.buffer).setBigUint64(0, headerLen ?? BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  out.set(dataBytes, 8 + headerBytes.length);
  return out;
}

function u16le(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const dv = new DataView(out.buffer);
  values.forEach((v, i) => dv.setUint16(2 * i, v, true));
  return out;
}

function f32le(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const dv = new DataView(out.buffer);
  values.forEach((v, i) => dv.setFloat32(4 * i, v, true));
  return out;
}

/** Raw u16 words of a tensor as stored in the file. */
function storedU16(bytes: Uint8Array, byteOffset: number, count: number): number[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Array.from({ length: count }, (_, i) => dv.getUint16(byteOffset + 2 * i, true));
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a SafetensorsError, but nothing was thrown');
}

interface Expected {
  tensor?: string;
  offset?: number;
  message: string | RegExp;
}

function expectStError(fn: () => unknown, expected: Expected): SafetensorsError {
  const err = catchError(fn);
  expect(err).toBeInstanceOf(SafetensorsError);
  const e = err as SafetensorsError;
  expect(e.name).toBe('SafetensorsError');
  expect(e.code).toBe('OMNIRX_ERR_SAFETENSORS');
  expect(e.tensor).toEqual(expected.tensor);
  expect(e.offset).toEqual(expected.offset);
  if (typeof expected.message === 'string') expect(e.message).toContain(expected.message);
  else expect(e.message).toMatch(expected.message);
  return e;
}

function entry(dtype: string, shape: unknown, offsets: unknown): Record<string, unknown> {
  return { dtype, shape, data_offsets: offsets };
}

/** A valid file with several dtypes, metadata and a hole, used by truncation and fuzz tests. */
function sampleFile(): Uint8Array {
  return serializeSafetensors(
    {
      'blocks.0.attn1.to_q.weight': { shape: [2, 3], data: new Float32Array([1, -2.5, 0.5, 3, 4, -0]) },
      'blocks.0.norm.bias': { shape: [4], data: new Float32Array([1, 2, 65504, 2 ** -24]), dtype: 'F16' },
      'blocks.0.ff.weight': { shape: [1, 3], data: new Float32Array([3.140625, -1, 1e30]), dtype: 'BF16' },
      scalar: { shape: [], data: new Float32Array([7]) },
      empty: { shape: [0, 5], data: new Float32Array(0) },
    },
    { format: 'pt', note: 'sample' },
  );
}

// ---------------------------------------------------------------------------
// round trips

describe('safetensors round trip', () => {
  it('round-trips F32 exactly, with shapes, metadata and file-order entries', () => {
    const a = new Float32Array([1, -2.5, 65504, 2 ** -24, Infinity, -Infinity, 0, -0]);
    const b = new Float32Array([Math.fround(0.1), Math.fround(-1e-40)]); // includes an f32 subnormal
    const bytes = serializeSafetensors({ a: { shape: [2, 4], data: a }, b: { shape: [2], data: b } }, { format: 'pt' });
    const file = parseSafetensors(bytes);

    expect(file.metadata).toEqual({ format: 'pt' });
    expect(file.entries.map((e) => e.name)).toEqual(['a', 'b']);
    const [ea, eb] = file.entries;
    expect(ea).toMatchObject({ name: 'a', dtype: 'F32', shape: [2, 4], byteLength: 32 });
    expect(eb).toMatchObject({ name: 'b', dtype: 'F32', shape: [2], byteLength: 8 });
    expect(eb!.byteOffset).toBe(ea!.byteOffset + 32);
    // header padded so the data buffer is 8-aligned
    expect(ea!.byteOffset % 8).toBe(0);

    expect(Array.from(file.float32('a'))).toEqual(Array.from(a));
    expect(Object.is(file.float32('a')[7], -0)).toBe(true);
    expect(Array.from(file.float32('b'))).toEqual(Array.from(b));
    expect(file.has('a')).toBe(true);
    expect(file.has('missing')).toBe(false);
  });

  it('keeps NaN through F32/F16/BF16', () => {
    for (const dtype of ['F32', 'F16', 'BF16'] as SafetensorsDtype[]) {
      const file = parseSafetensors(serializeSafetensors({ x: { shape: [1], data: new Float32Array([NaN]), dtype } }));
      expect(Number.isNaN(file.float32('x')[0])).toBe(true);
    }
  });

  it('writes F16 with round-to-nearest-even (hand-computed bit patterns)', () => {
    const cases: Array<[number, number]> = [
      [1.0, 0x3c00],
      [-2.5, 0xc100],
      [65504, 0x7bff], // largest finite half
      [65519, 0x7bff], // below the halfway point to 65536
      [65520, 0x7c00], // exact tie between 65504 (odd mantissa) and 2^16: rounds to even = +inf
      [1e6, 0x7c00], // overflow
      [-Infinity, 0xfc00],
      [2 ** -24, 0x0001], // smallest subnormal
      [1023 * 2 ** -24, 0x03ff], // largest subnormal
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24: rounds to even 0
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 (x 2^-24): rounds to even 2
      [2 ** -26, 0x0000],
      [1 + 2 ** -11, 0x3c00], // tie: stays on even 0x3c00
      [1 + 3 * 2 ** -11, 0x3c02], // tie between 0x3c01 and 0x3c02: rounds to even
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie: rounds up
      [-0, 0x8000],
      [0.1, 0x2e66],
    ];
    const data = new Float32Array(cases.map(([v]) => v));
    const bytes = serializeSafetensors({ h: { shape: [cases.length], data, dtype: 'F16' } });
    const file = parseSafetensors(bytes);
    const e = file.entries[0]!;
    expect(e).toMatchObject({ dtype: 'F16', byteLength: cases.length * 2 });
    expect(storedU16(bytes, e.byteOffset, cases.length)).toEqual(cases.map(([, bits]) => bits));
  });

  it('reads F16 exactly: normals, subnormals, infinities, NaN, signed zero', () => {
    const words = [0x3c00, 0xc100, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3555, 0x8001];
    const expected = [
      1,
      -2.5,
      65504,
      2 ** -24,
      1023 * 2 ** -24,
      2 ** -14,
      Infinity,
      -Infinity,
      NaN,
      -0,
      0.333251953125,
      -(2 ** -24),
    ];
    const file = parseSafetensors(rawFile({ h: entry('F16', [words.length], [0, words.length * 2]) }, u16le(words)));
    const got = Array.from(file.float32('h'));
    expect(got).toEqual(expected); // toEqual treats NaN as equal to NaN
    expect(Object.is(got[9], -0)).toBe(true);
  });

  it('round-trips every F16 and BF16 bit pattern (NaN stays NaN)', () => {
    const all = Array.from({ length: 65536 }, (_, i) => i);
    for (const dtype of ['F16', 'BF16'] as const) {
      const file = parseSafetensors(rawFile({ x: entry(dtype, [65536], [0, 131072]) }, u16le(all)));
      const widened = file.float32('x');
      const again = serializeSafetensors({ x: { shape: [65536], data: widened, dtype } });
      const stored = storedU16(again, parseSafetensors(again).entries[0]!.byteOffset, 65536);
      const expBits = dtype === 'F16' ? 0x7c00 : 0x7f80;
      const mantMask = dtype === 'F16' ? 0x3ff : 0x7f;
      for (let h = 0; h < 65536; h++) {
        const isNaN = (h & expBits) === expBits && (h & mantMask) !== 0;
        if (isNaN) {
          expect(Number.isNaN(widened[h])).toBe(true);
          expect((stored[h]! & expBits) === expBits && (stored[h]! & mantMask) !== 0).toBe(true);
        } else if (stored[h] !== h) {
          throw new Error(`${dtype} 0x${h.toString(16)} came back as 0x${stored[h]!.toString(16)}`);
        }
      }
    }
  });

  it('rounds random float32 values to the nearest F16, ties to even (independent oracle)', () => {
    const halfValue = (h: number): number => {
      const e = (h >> 10) & 0x1f;
      const m = h & 0x3ff;
      const mag = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
      return h & 0x8000 ? -mag : mag;
    };
    const rand = prng(99);
    const bits = new Uint32Array(2000);
    const floats = new Float32Array(bits.buffer);
    for (let i = 0; i < bits.length; i++) {
      // exponents spread over the F16 range and a little beyond, random mantissas, random sign
      const exp = 127 - 27 + Math.floor(rand() * 45);
      bits[i] = ((rand() < 0.5 ? 0x80000000 : 0) | (exp << 23) | Math.floor(rand() * 0x800000)) >>> 0;
    }
    // add exact ties around subnormals and normals
    floats[0] = 2 ** -24 * 1.5;
    floats[1] = 2 ** -24 * 2.5;
    floats[2] = 1 + 2 ** -11;
    const bytes = serializeSafetensors({ x: { shape: [floats.length], data: floats, dtype: 'F16' } });
    const stored = storedU16(bytes, parseSafetensors(bytes).entries[0]!.byteOffset, floats.length);
    for (let i = 0; i < floats.length; i++) {
      const x = Math.abs(floats[i]!);
      const h = stored[i]! & 0x7fff;
      expect(stored[i]! & 0x8000 ? 1 : 0).toBe(floats[i]! < 0 ? 1 : 0);
      if (x >= 65520) {
        expect(h).toBe(0x7c00);
        continue;
      }
      const v = halfValue(h);
      const err = Math.abs(x - v);
      const below = h > 0 ? Math.abs(x - halfValue(h - 1)) : Infinity;
      const above = h < 0x7bff ? Math.abs(x - halfValue(h + 1)) : Infinity;
      expect(err).toBeLessThanOrEqual(below);
      expect(err).toBeLessThanOrEqual(above);
      if (err === below || err === above) expect(h & 1).toBe(0);
    }
  });

  it('writes and reads BF16 (round-to-nearest-even; 3.140625 exact)', () => {
    const cases: Array<[number, number]> = [
      [3.140625, 0x4049], // exactly representable
      [Math.fround(Math.PI), 0x4049], // 0x40490fdb rounds down to 3.140625
      [1.0, 0x3f80],
      [-2.5, 0xc020],
      [1 + 2 ** -8, 0x3f80], // tie 0x3f808000 -> even 0x3f80
      [1 + 3 * 2 ** -8, 0x3f82], // tie 0x3f818000 -> even 0x3f82
      [Infinity, 0x7f80],
      [-0, 0x8000],
      [3.4028234663852886e38, 0x7f80], // f32 max rounds up to inf in bf16
    ];
    const data = new Float32Array(cases.map(([v]) => v));
    const bytes = serializeSafetensors({ b: { shape: [cases.length], data, dtype: 'BF16' } });
    const file = parseSafetensors(bytes);
    const e = file.entries[0]!;
    expect(storedU16(bytes, e.byteOffset, cases.length)).toEqual(cases.map(([, bits]) => bits));
    const back = file.float32('b');
    expect(back[0]).toBe(3.140625);
    expect(back[1]).toBe(3.140625);
    expect(back[2]).toBe(1);
    expect(back[3]).toBe(-2.5);
    expect(back[5]).toBe(1 + 2 ** -6);
    expect(back[6]).toBe(Infinity);
    expect(Object.is(back[7], -0)).toBe(true);
  });

  it('round-trips a mixed file and lays wider dtypes first (aligned)', () => {
    const bytes = sampleFile();
    const file = parseSafetensors(bytes, 'sample.safetensors');
    expect(file.metadata).toEqual({ format: 'pt', note: 'sample' });
    expect(file.entries.map((e) => [e.name, e.dtype])).toEqual([
      ['blocks.0.attn1.to_q.weight', 'F32'],
      ['scalar', 'F32'],
      ['empty', 'F32'],
      ['blocks.0.norm.bias', 'F16'],
      ['blocks.0.ff.weight', 'BF16'],
    ]);
    for (const e of file.entries) if (e.dtype === 'F32') expect(e.byteOffset % 4).toBe(0);
    expect(Array.from(file.float32('blocks.0.norm.bias'))).toEqual([1, 2, 65504, 2 ** -24]);
    expect(file.float32('blocks.0.ff.weight')[0]).toBe(3.140625);
    expect(Array.from(file.float32('scalar'))).toEqual([7]);
    expect(file.float32('empty').length).toBe(0);
    expect(file.entries.find((e) => e.name === 'empty')!.shape).toEqual([0, 5]);
  });

  it('round-trips metadata (including awkward keys) and omits it when empty', () => {
    const meta = { format: 'pt', 'ünïcode ☃': 'välue\n"quoted"', __proto__x: 'p', empty: '' };
    expect(parseSafetensors(serializeSafetensors({}, meta)).metadata).toEqual(meta);
    expect(parseSafetensors(serializeSafetensors({ a: { shape: [1], data: new Float32Array([1]) } })).metadata).toEqual({});
    // a "__proto__" key becomes an ordinary own property, not a prototype
    const parsed = parseSafetensors(rawFile('{"__metadata__":{"__proto__":"x"}}')).metadata;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(['__proto__']);
  });

  it('reads F32 at unaligned offsets and from an offset view, returning an independent copy', () => {
    // 1-byte hole before the tensor: its absolute offset is odd
    const data = new Uint8Array(1 + 12);
    data.set(f32le([1.5, -2.5, 65504]), 1);
    // pad the header with spaces so the data buffer starts 4-aligned; the tensor is then at 1 (mod 4)
    let header = JSON.stringify({ t: entry('F32', [3], [1, 13]) });
    while ((8 + header.length) % 4 !== 0) header += ' ';
    const inner = rawFile(header, data);
    // place the file at an odd offset inside a larger buffer: the tensor is at 2 (mod 4) there
    const backing = new Uint8Array(inner.length + 1);
    backing.set(inner, 1);
    const view = backing.subarray(1);
    const file = parseSafetensors(view);
    const e = file.entries[0]!;
    expect(e.byteOffset % 4).toBe(1);
    expect((view.byteOffset + e.byteOffset) % 4).toBe(2);
    const out = file.float32('t');
    expect(out.byteOffset % 4).toBe(0);
    expect(Array.from(out)).toEqual([1.5, -2.5, 65504]);
    out[0] = 99;
    expect(file.float32('t')[0]).toBe(1.5);
  });

  it('orders entries by data offset (file order), not header order', () => {
    const file = parseSafetensors(
      rawFile({ z: entry('F32', [1], [4, 8]), '10': entry('F32', [1], [8, 12]), a: entry('F32', [1], [0, 4]) }, f32le([1, 2, 3])),
    );
    expect(file.entries.map((e) => e.name)).toEqual(['a', 'z', '10']);
    expect(Array.from(file.float32('10'))).toEqual([3]);
  });

  it('treats prototype property names as ordinary (absent) names', () => {
    const file = parseSafetensors(rawFile({ constructor: entry('F32', [1], [0, 4]) }, f32le([5])));
    expect(file.has('constructor')).toBe(true);
    expect(file.has('toString')).toBe(false);
    expect(file.has('__proto__')).toBe(false);
    expect(Array.from(file.float32('constructor'))).toEqual([5]);
    expectStError(() => file.float32('hasOwnProperty'), { tensor: 'hasOwnProperty', message: 'no such tensor' });
  });

  it('reads and writes files on disk', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'omnirx-st-'));
    try {
      const path = join(dir, 'model.safetensors');
      await writeSafetensors(
        path,
        { w: { shape: [2, 2], data: new Float32Array([1, 2, 3, 4]), dtype: 'F16' } },
        { step: '3' },
      );
      const file = await readSafetensors(path);
      expect(file.metadata).toEqual({ step: '3' });
      expect(Array.from(file.float32('w'))).toEqual([1, 2, 3, 4]);

      const bad = join(dir, 'bad.safetensors');
      await writeFile(bad, rawFile({ w: entry('F32', [2], [0, 8]) }, 4));
      const err = await readSafetensors(bad).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SafetensorsError);
      expect((err as SafetensorsError).source).toBe(bad);
      expect((err as SafetensorsError).tensor).toBe('w');
      expect((err as SafetensorsError).message.startsWith(`${bad}: tensor "w": `)).toBe(true);

      // I/O errors pass through unchanged
      await expect(readSafetensors(join(dir, 'nope.safetensors'))).rejects.toMatchObject({ code: 'ENOENT' });
      // invalid tensors: nothing written
      await expect(
        writeSafetensors(join(dir, 'x.safetensors'), { x: { shape: [3], data: new Float32Array(2) } }),
      ).rejects.toBeInstanceOf(SafetensorsError);
      await expect(readSafetensors(join(dir, 'x.safetensors'))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------
// non-float dtypes

describe('non-float dtypes', () => {
  const data = new Uint8Array(8 + 4 + 3);
  const bytes = rawFile(
    {
      'text_model.embeddings.position_ids': entry('I64', [1, 1], [0, 8]),
      w: entry('F32', [1], [8, 12]),
      mask: entry('BOOL', [3], [12, 15]),
    },
    data,
  );

  it('parses and validates them, but excludes them from entries and has()', () => {
    const file = parseSafetensors(bytes, 'clip.safetensors');
    expect(file.entries.map((e) => e.name)).toEqual(['w']);
    expect(file.has('text_model.embeddings.position_ids')).toBe(false);
    expect(file.has('mask')).toBe(false);
  });

  it('float32() rejects them naming the dtype and the supported ones', () => {
    const file = parseSafetensors(bytes, 'clip.safetensors');
    const dataStart = file.entries[0]!.byteOffset - 8;
    const e = expectStError(() => file.float32('text_model.embeddings.position_ids'), {
      tensor: 'text_model.embeddings.position_ids',
      offset: dataStart,
      message: 'dtype I64 cannot be loaded as float32 (supported: F32, F16, BF16)',
    });
    expect(e.source).toBe('clip.safetensors');
    expect(e.message.startsWith('clip.safetensors: tensor "text_model.embeddings.position_ids": ')).toBe(true);
  });

  it('still checks their byte size and overlap', () => {
    expectStError(() => parseSafetensors(rawFile({ ids: entry('I64', [2], [0, 8]) }, 16)), {
      tensor: 'ids',
      offset: 8,
      message: 'give 8 bytes but dtype I64 × shape [2] needs 16',
    });
    const bad = rawFile({ ids: entry('I64', [1], [0, 8]), w: entry('F32', [1], [4, 8]) }, 8);
    expectStError(() => parseSafetensors(bad), { tensor: 'w', offset: bad.length - 4, message: 'overlap tensor "ids"' });
  });
});

// ---------------------------------------------------------------------------
// hostile input: one test per validation rule

describe('hostile input', () => {
  it('rejects files shorter than 8 bytes', () => {
    for (const n of [0, 1, 7]) {
      expectStError(() => parseSafetensors(new Uint8Array(n), 'm.safetensors'), {
        offset: 0,
        message: `m.safetensors: file is ${n} bytes, shorter than the 8-byte header length field`,
      });
    }
  });

  it('rejects a header length of 0', () => {
    expectStError(() => parseSafetensors(rawFile('', 16)), { offset: 0, message: 'header length (bytes 0-7) is 0' });
  });

  it('rejects a header length larger than the file (lying length)', () => {
    expectStError(() => parseSafetensors(rawFile('{}', 0, 3n)), {
      offset: 0,
      message: 'header length (bytes 0-7) is 3 bytes but only 2 bytes follow',
    });
    // Over the cap the length is not shown: it is most likely the first 8 bytes of another file's content.
    for (const len of [1n << 60n, (1n << 64n) - 1n, 0xffffffffn]) {
      const e = expectStError(() => parseSafetensors(rawFile('{}', 0, len)), {
        offset: 0,
        message: 'not a safetensors file: the header length (bytes 0-7) is over the 100000000-byte cap',
      });
      expect(e.message).not.toContain(len.toString());
    }
  });

  it('rejects a header over the 100 MB cap without reading it', () => {
    expectStError(() => parseSafetensors(rawFile('{}', 0, 100_000_001n)), {
      offset: 0,
      message: 'over the 100000000-byte cap',
    });
  });

  it('rejects a header that is not valid UTF-8, pointing at the bad byte', () => {
    const header = Buffer.concat([Buffer.from('{"ab'), Buffer.from([0xc3, 0x28]), Buffer.from('":1}')]);
    expectStError(() => parseSafetensors(rawFileBytes(header)), { offset: 8 + 4, message: 'not valid UTF-8 (at byte 12)' });
    const overlong = Buffer.concat([Buffer.from('{"'), Buffer.from([0xc0, 0xaf]), Buffer.from('":1}')]);
    expectStError(() => parseSafetensors(rawFileBytes(overlong)), { offset: 10, message: 'not valid UTF-8' });
    const surrogate = Buffer.concat([Buffer.from('{"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('":1}')]);
    expectStError(() => parseSafetensors(rawFileBytes(surrogate)), { offset: 10, message: 'not valid UTF-8' });
    const cut = Buffer.concat([Buffer.from('{"a":1}'), Buffer.from([0xe2, 0x82])]);
    expectStError(() => parseSafetensors(rawFileBytes(cut)), { offset: 15, message: 'not valid UTF-8' });
  });

  it('rejects a header that is not JSON, with the byte offset when known', () => {
    // V8: "Expected ':' after property name in JSON at position 6"; the two "é" take 2 bytes each. The parser's
    // message (which may quote the text) is not repeated: only the byte offset is.
    const e = expectStError(() => parseSafetensors(rawFile('{"éé" 1}')), { offset: 8 + 8, message: 'header (bytes 8-17) is not valid JSON (at byte 16)' });
    expect(e.message).not.toContain('position');
    expectStError(() => parseSafetensors(rawFile('{"a":1')), { offset: expect.any(Number) as unknown as number, message: 'not valid JSON' });
    expectStError(() => parseSafetensors(rawFile('\ufeff{}')), { offset: 8, message: 'not valid JSON' });
    expectStError(() => parseSafetensors(rawFile('   ')), { offset: 8, message: 'not valid JSON' });
  });

  it('rejects a header that is not an object', () => {
    for (const [text, kind] of [
      ['[1,2]', 'an array'],
      ['42', 'a number'],
      ['null', 'null'],
      ['"str"', 'a string'],
      ['true', 'a boolean'],
    ]) {
      expectStError(() => parseSafetensors(rawFile(text!)), {
        offset: 8,
        message: `header must be a JSON object, got ${kind} (header at byte 8)`,
      });
    }
  });

  it('rejects an entry that is not an object', () => {
    for (const value of [5, 'x', null, [1, 2], true]) {
      expectStError(() => parseSafetensors(rawFile({ 'w.0': value })), {
        tensor: 'w.0',
        offset: 8,
        message: 'tensor "w.0": entry must be an object with dtype, shape and data_offsets',
      });
    }
  });

  it('rejects unknown dtypes, naming them and listing the allowed ones', () => {
    const e = expectStError(() => parseSafetensors(rawFile({ w: entry('F33', [1], [0, 4]) }, 4)), {
      tensor: 'w',
      offset: 8,
      message: 'unknown dtype "F33"; allowed: F32, F16, BF16, ',
    });
    expect(e.message).toContain('I64');
    for (const dtype of ['constructor', '__proto__', 'f32', 'F4', '']) {
      expectStError(() => parseSafetensors(rawFile({ w: entry(dtype, [1], [0, 4]) }, 4)), {
        tensor: 'w',
        offset: 8,
        message: `unknown dtype ${JSON.stringify(dtype)}`,
      });
    }
    for (const dtype of [32, null, ['F32']]) {
      expectStError(() => parseSafetensors(rawFile({ w: { dtype, shape: [1], data_offsets: [0, 4] } }, 4)), {
        tensor: 'w',
        offset: 8,
        message: 'dtype must be a string',
      });
    }
    expectStError(() => parseSafetensors(rawFile({ w: { shape: [1], data_offsets: [0, 4] } }, 4)), {
      tensor: 'w',
      offset: 8,
      message: 'dtype must be a string, got undefined',
    });
  });

  it('rejects shapes that are not arrays of non-negative safe integers', () => {
    for (const shape of ['3', 3, null, { 0: 1 }]) {
      expectStError(() => parseSafetensors(rawFile({ w: entry('F32', shape, [0, 4]) }, 4)), {
        tensor: 'w',
        offset: 8,
        message: 'shape must be an array of non-negative integers',
      });
    }
    for (const [shape, bad] of [
      [[-1], '-1'],
      [[1.5], '1.5'],
      [['3'], '"3"'],
      [[null], 'null'],
      [[[2]], '[2]'],
      [[2 ** 53], '9007199254740992'],
      [[1e300], '1e+300'],
    ] as Array<[unknown[], string]>) {
      expectStError(() => parseSafetensors(rawFile({ w: entry('F32', shape, [0, 4]) }, 4)), {
        tensor: 'w',
        offset: 8,
        message: `shape must be an array of non-negative safe integers, got ${JSON.stringify(shape)} (bad dimension ${bad})`,
      });
    }
  });

  it('rejects shapes whose element count or byte size overflows 2^53-1', () => {
    expectStError(() => parseSafetensors(rawFile({ w: entry('F32', [2 ** 26, 2 ** 26, 2 ** 26], [0, 4]) }, 4)), {
      tensor: 'w',
      offset: 8,
      message: 'has more than 2^53-1 elements',
    });
    // overflow before a trailing zero is still rejected: the product is checked at every step
    expectStError(() => parseSafetensors(rawFile({ w: entry('F32', [2 ** 52, 4, 0], [0, 0]) })), {
      tensor: 'w',
      offset: 8,
      message: 'has more than 2^53-1 elements',
    });
    expectStError(() => parseSafetensors(rawFile({ w: entry('F32', [2 ** 52], [0, 4]) }, 4)), {
      tensor: 'w',
      offset: 8,
      message: 'of dtype F32 needs more than 2^53-1 bytes',
    });
    // a zero dimension makes an empty tensor
    const ok = parseSafetensors(rawFile({ w: entry('F32', [2 ** 40, 0], [0, 0]) }));
    expect(ok.float32('w').length).toBe(0);
  });

  it('rejects data_offsets that are not two non-negative integers', () => {
    for (const offsets of [undefined, 'x', [0], [0, 4, 8], [-4, 0], [0, -4], [0.5, 4], ['0', '4'], [0, 2 ** 53], null]) {
      expectStError(() => parseSafetensors(rawFile({ w: entry('F32', [1], offsets) }, 4)), {
        tensor: 'w',
        offset: 8,
        message: 'data_offsets must be two non-negative integers [begin, end]',
      });
    }
  });

  it('rejects data_offsets with begin > end', () => {
    expectStError(() => parseSafetensors(rawFile({ w: entry('F32', [1], [8, 4]) }, 8)), {
      tensor: 'w',
      offset: 8,
      message: 'data_offsets [8, 4] have begin > end',
    });
  });

  it('rejects a byte length that does not match dtype × shape (exact message)', () => {
    const name = 'blocks.0.attn1.to_q.weight';
    const e = expectStError(
      () => parseSafetensors(rawFile({ [name]: entry('F32', [5, 6], [0, 100]) }, 120), 'model.safetensors'),
      { tensor: name, offset: 8, message: 'needs 120' },
    );
    expect(e.source).toBe('model.safetensors');
    expect(e.message).toBe(
      'model.safetensors: tensor "blocks.0.attn1.to_q.weight": data_offsets [0, 100] give 100 bytes but ' +
        'dtype F32 × shape [5,6] needs 120 (header at byte 8)',
    );
    expectStError(() => parseSafetensors(rawFile({ h: entry('F16', [3], [0, 4]) }, 8)), {
      tensor: 'h',
      offset: 8,
      message: 'give 4 bytes but dtype F16 × shape [3] needs 6',
    });
  });

  it('rejects offsets beyond the data buffer', () => {
    const bytes = rawFile({ w: entry('F32', [2], [4, 12]) }, 8);
    const dataStart = bytes.length - 8;
    expectStError(() => parseSafetensors(bytes), {
      tensor: 'w',
      offset: dataStart + 4,
      message: `data_offsets [4, 12] span bytes [${dataStart + 4}, ${dataStart + 12}) of the file but the data buffer (starting at byte ${dataStart}) holds 8 bytes`,
    });
    // huge (but safe) offsets are only compared, never allocated; offset is clamped to the end of the file
    const far = rawFile({ w: entry('F32', [1], [2 ** 53 - 5, 2 ** 53 - 1]) }, 8);
    const farStart = far.length - 8;
    expectStError(() => parseSafetensors(far), {
      tensor: 'w',
      offset: far.length,
      message: `span bytes [${BigInt(farStart) + BigInt(2 ** 53 - 5)}, ${BigInt(farStart) + BigInt(2 ** 53 - 1)}) of the file`,
    });
  });

  it('rejects overlapping tensors but allows holes and empty tensors inside others', () => {
    const overlapping = rawFile({ a: entry('F32', [2], [0, 8]), b: entry('F32', [2], [4, 12]) }, 12);
    const dataStart = overlapping.length - 12;
    expectStError(() => parseSafetensors(overlapping), {
      tensor: 'b',
      offset: dataStart + 4,
      message: `data_offsets [4, 12] overlap tensor "a" [0, 8]: bytes [${dataStart + 4}, ${dataStart + 8}) of the file are shared`,
    });
    // identical ranges; nested range (header order does not matter)
    expectStError(() => parseSafetensors(rawFile({ a: entry('F32', [1], [0, 4]), b: entry('F32', [1], [0, 4]) }, 4)), {
      tensor: 'b',
      offset: expect.any(Number) as unknown as number,
      message: 'overlap tensor "a"',
    });
    expectStError(
      () =>
        parseSafetensors(
          rawFile({ inner: entry('F32', [1], [8, 12]), outer: entry('F32', [4], [0, 16]), c: entry('F32', [1], [16, 20]) }, 20),
        ),
      { tensor: 'inner', offset: expect.any(Number) as unknown as number, message: 'overlap tensor "outer" [0, 16]' },
    );
    // holes, trailing bytes and zero-length tensors are fine
    const holes = parseSafetensors(
      rawFile(
        { a: entry('F32', [1], [0, 4]), b: entry('F32', [1], [8, 12]), z: entry('F32', [0], [2, 2]) },
        f32le([1, 0, 2, 0, 0]),
      ),
    );
    expect(holes.entries.map((e) => e.name)).toEqual(['a', 'z', 'b']);
    expect(Array.from(holes.float32('b'))).toEqual([2]);
  });

  it('rejects __metadata__ that is not an object of strings', () => {
    for (const meta of [{ a: 1 }, { a: null }, { a: ['x'] }, { a: { b: 'c' } }]) {
      expectStError(() => parseSafetensors(rawFile({ __metadata__: meta })), {
        offset: 8,
        message: '"__metadata__" value for key "a" must be a string',
      });
    }
    for (const meta of ['x', null, ['a'], 3]) {
      expectStError(() => parseSafetensors(rawFile({ __metadata__: meta })), {
        offset: 8,
        message: '"__metadata__" must be an object of strings',
      });
    }
  });

  it('escapes and caps hostile tensor names in messages but keeps them whole in .tensor', () => {
    const name = `evil"\n\u0000${'x'.repeat(1000)}`;
    const e = expectStError(() => parseSafetensors(rawFile({ [name]: 7 })), {
      tensor: name,
      offset: 8,
      message: 'tensor "evil\\"\\n\\u0000xxx',
    });
    expect(e.message.length).toBeLessThan(500);
    expect(e.message).not.toContain('\n');
  });

  it('float32() names an absent tensor', () => {
    const file = parseSafetensors(sampleFile(), 'm.safetensors');
    expectStError(() => file.float32('blocks.9.missing'), {
      tensor: 'blocks.9.missing',
      message: 'm.safetensors: tensor "blocks.9.missing": no such tensor in the file (5 tensors present)',
    });
  });

  it('rejects a file truncated at any cut point', () => {
    const full = sampleFile();
    const headerLen = Number(new DataView(full.buffer, full.byteOffset).getBigUint64(0, true));
    const dataStart = 8 + headerLen;
    const cuts = [0, 1, 4, 7, 8, 9, 8 + Math.floor(headerLen / 2), dataStart - 1, dataStart, dataStart + 3, full.length - 1];
    for (const cut of cuts) {
      const err = catchError(() => parseSafetensors(full.subarray(0, cut)));
      expect(err).toBeInstanceOf(SafetensorsError);
      const e = err as SafetensorsError;
      if (cut < 8) {
        expect(e.offset).toBe(0);
        expect(e.message).toContain('shorter than the 8-byte header length field');
      } else if (cut < dataStart) {
        expect(e.offset).toBe(0);
        expect(e.message).toContain(`but only ${cut - 8} bytes follow`);
      } else {
        expect(e.tensor).toBeDefined();
        expect(e.offset).toBeGreaterThanOrEqual(dataStart);
        expect(e.message).toContain('of the file but the data buffer');
      }
    }
    // every cut point, exhaustively: always a SafetensorsError
    for (let cut = 0; cut < full.length; cut++) {
      expect(catchError(() => parseSafetensors(full.subarray(0, cut)))).toBeInstanceOf(SafetensorsError);
    }
  });

  it('rejects non-Uint8Array input', () => {
    expectStError(() => parseSafetensors('not bytes' as unknown as Uint8Array), { message: 'Uint8Array' });
  });
});

// ---------------------------------------------------------------------------
// writer input validation

describe('serializeSafetensors input validation', () => {
  it('rejects bad tensors with SafetensorsError naming them', () => {
    const d = new Float32Array(2);
    expectStError(() => serializeSafetensors({ w: { shape: [3], data: d } }), {
      tensor: 'w',
      message: 'shape [3] has 3 elements but data has 2',
    });
    expectStError(() => serializeSafetensors({ w: { shape: [-2], data: d } }), {
      tensor: 'w',
      message: 'shape must be an array of non-negative safe integers',
    });
    expectStError(() => serializeSafetensors({ w: { shape: [2], data: d, dtype: 'I64' as SafetensorsDtype } }), {
      tensor: 'w',
      message: 'dtype "I64" cannot be written; allowed: F32, F16, BF16',
    });
    expectStError(() => serializeSafetensors({ w: { shape: [2], data: [1, 2] as unknown as Float32Array } }), {
      tensor: 'w',
      message: 'data must be a Float32Array',
    });
    expectStError(() => serializeSafetensors({ __metadata__: { shape: [2], data: d } }), {
      tensor: '__metadata__',
      message: 'reserved',
    });
    expectStError(() => serializeSafetensors({}, { a: 1 as unknown as string }), {
      message: 'metadata value for key "a" must be a string',
    });
  });
});

// ---------------------------------------------------------------------------
// fuzzing: every outcome is a valid parse or a SafetensorsError

function checkOutcome(bytes: Uint8Array): 'ok' | 'error' {
  let file;
  try {
    file = parseSafetensors(bytes, 'fuzz.safetensors');
  } catch (err) {
    if (!(err instanceof SafetensorsError)) throw err; // fails the test with the real exception
    expect(err.code).toBe('OMNIRX_ERR_SAFETENSORS');
    if (err.offset !== undefined) {
      expect(Number.isSafeInteger(err.offset)).toBe(true);
      expect(err.offset).toBeGreaterThanOrEqual(0);
      expect(err.offset).toBeLessThanOrEqual(bytes.length);
    }
    return 'error';
  }
  for (const e of file.entries) {
    expect(e.byteOffset + e.byteLength).toBeLessThanOrEqual(bytes.length);
    const numel = e.shape.reduce((a, b) => a * b, 1);
    expect(file.has(e.name)).toBe(true);
    expect(file.float32(e.name).length).toBe(numel);
  }
  return 'ok';
}

describe('fuzz', () => {
  it('survives 300 seeded random byte mutations of a valid file', () => {
    const base = sampleFile();
    const headerLen = Number(new DataView(base.buffer, base.byteOffset).getBigUint64(0, true));
    const rand = prng(0x5afe7e45);
    const int = (n: number) => Math.floor(rand() * n);
    const jsonish = Buffer.from('0123456789-.eE[]{}",: \\u');
    const counts = { ok: 0, error: 0 };
    for (let iter = 0; iter < 300; iter++) {
      let bytes = Uint8Array.from(base);
      const kind = iter % 6;
      const nMut = 1 + int(4);
      for (let m = 0; m < nMut; m++) {
        if (kind === 0) {
          bytes[int(bytes.length)] = int(256); // any byte
        } else if (kind === 1) {
          bytes[8 + int(headerLen)] = jsonish[int(jsonish.length)]!; // JSON-relevant byte in the header
        } else if (kind === 2) {
          bytes[int(8)] = int(256); // the length field
        } else if (kind === 3) {
          bytes = bytes.subarray(0, int(bytes.length + 1)); // truncation
        } else if (kind === 4) {
          const at = int(bytes.length + 1); // insertion / deletion
          const next = rand() < 0.5
            ? Uint8Array.from([...bytes.subarray(0, at), int(256), ...bytes.subarray(at)])
            : Uint8Array.from([...bytes.subarray(0, at), ...bytes.subarray(at + 1)]);
          bytes = next;
        } else {
          const pos = 8 + int(headerLen); // digit tweak: keeps JSON valid more often
          if (bytes[pos]! >= 0x30 && bytes[pos]! <= 0x39) bytes[pos] = 0x30 + int(10);
          else bytes[8 + int(headerLen)] = 0x30 + int(10);
        }
      }
      counts[checkOutcome(bytes)]++;
    }
    expect(counts.ok + counts.error).toBe(300);
    expect(counts.error).toBeGreaterThan(0);
    expect(counts.ok).toBeGreaterThan(0);
  });

  it('survives 300 seeded structural mutations of the header', () => {
    const rand = prng(1234567);
    const int = (n: number) => Math.floor(rand() * n);
    const hostile: unknown[] = [
      -1, 0, 1, 3, 4, 1.5, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 64, 1e308, -0, null, true, 'F32', 'BF16', 'I64',
      'F33', '', [], [0], [1, 2], [0, 4, 8], [[1]], {}, { a: 1 }, [2 ** 30, 2 ** 30], [4, 0], ['0', '4'],
    ];
    const counts = { ok: 0, error: 0 };
    const data = f32le([1, 2, 3, 4, 5, 6, 7, 8]);
    for (let iter = 0; iter < 300; iter++) {
      const header: Record<string, unknown> = {
        __metadata__: { format: 'pt' },
        a: entry('F32', [2], [0, 8]),
        b: entry('F16', [2, 2], [8, 16]),
        c: entry('BF16', [4], [16, 24]),
        d: entry('I64', [1], [24, 32]),
      };
      const names = Object.keys(header);
      const nMut = 1 + int(3);
      for (let m = 0; m < nMut; m++) {
        const name = names[int(names.length)]!;
        const value = hostile[int(hostile.length)];
        const target = header[name];
        if (rand() < 0.2 || typeof target !== 'object' || target === null) {
          header[name] = value;
        } else {
          const field = ['dtype', 'shape', 'data_offsets', 'format', 'extra'][int(5)]!;
          (target as Record<string, unknown>)[field] = value;
        }
      }
      counts[checkOutcome(rawFile(header, data))]++;
    }
    expect(counts.error).toBeGreaterThan(0);
    expect(counts.ok).toBeGreaterThan(0);
  });

  it('survives random garbage', () => {
    const rand = prng(42);
    for (let iter = 0; iter < 100; iter++) {
      const bytes = Uint8Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256));
      if (bytes.length >= 8 && iter % 2 === 0) {
        // make the length field plausible so the header path is exercised
        new DataView(bytes.buffer).setBigUint64(0, BigInt(Math.floor(rand() * (bytes.length - 7))), true);
      }
      checkOutcome(bytes);
    }
  });
});
