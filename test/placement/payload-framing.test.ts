import * as zlib from 'node:zlib';
import { crc32Function, crc32Portable } from '../../src/placement/crc32';
import { decodePayload, encodePayload, encodePayloadParts, FIXED_HEADER_BYTES, PayloadFrameReader } from '../../src/placement/payload-framing';
import { float32Elements, PayloadError } from '../../src/pipeline/stage-payload';
import { samplePayload } from './payload-fixtures';

function payloadError(f: () => unknown): PayloadError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(PayloadError);
    return e as PayloadError;
  }
  throw new Error('expected a PayloadError');
}

/** Recomputes the CRC of a frame after a deliberate edit, so the edit itself is what is tested. */
function reseal(frame: Uint8Array): Uint8Array {
  const crc = crc32Function();
  const v = new DataView(frame.buffer, frame.byteOffset);
  v.setUint32(20, crc(frame.subarray(FIXED_HEADER_BYTES), crc(frame.subarray(0, 20))), true);
  return frame;
}

/** Replaces the JSON header of a frame (same length required), reseals it. */
function withHeader(frame: Uint8Array, edit: (h: Record<string, unknown>) => void): Uint8Array {
  const len = new DataView(frame.buffer, frame.byteOffset).getUint32(16, true);
  const header = JSON.parse(Buffer.from(frame.subarray(24, 24 + len)).toString()) as Record<string, unknown>;
  edit(header);
  const text = Buffer.from(JSON.stringify(header));
  expect(text.length).toBe(len);
  const out = frame.slice();
  out.set(text, 24);
  return reseal(out);
}

describe('crc32', () => {
  it('the portable CRC-32 agrees with zlib and chains', () => {
    const data = Buffer.from('The quick brown fox jumps over the lazy dog');
    expect(crc32Portable(data)).toBe(0x414fa339);
    expect(crc32Portable(data)).toBe(zlib.crc32(data));
    expect(crc32Portable(data.subarray(10), crc32Portable(data.subarray(0, 10)))).toBe(0x414fa339);
  });
});

describe('payload framing', () => {
  it('round-trips a payload with zero-copy, 8-aligned tensor views', () => {
    const frame = encodePayload(samplePayload());
    expect(frame.length % 8).toBe(0);
    expect(Buffer.from(frame.subarray(0, 4)).toString()).toBe('OMXP');
    const p = decodePayload(frame);
    expect(p.tensors.latents!.bytes.buffer).toBe(frame.buffer);
    expect(p.tensors.latents!.bytes.byteOffset % 8).toBe(0);
    expect(p.tensors.mask!.bytes.byteOffset % 8).toBe(0);
    expect([...float32Elements(p.tensors.latents!)]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...p.tensors.mask!.bytes]).toEqual([1, 0, 1, 0, 1]);
    const { tensors: _a, ...rest } = p;
    const { tensors: _b, ...want } = samplePayload();
    expect(rest).toEqual(want);
  });

  it('gathered parts concatenate to the contiguous frame, and tensor parts are views', () => {
    const src = samplePayload();
    const parts = encodePayloadParts(src);
    expect(parts[1]).toBe(src.tensors.latents!.bytes);
    expect(Buffer.concat(parts)).toEqual(Buffer.from(encodePayload(src)));
  });

  it('round-trips a payload with no tensors', () => {
    const p = decodePayload(encodePayload({ ...samplePayload(), tensors: {} }));
    expect(p.tensors).toEqual({});
  });

  it.each([
    ['bad magic', (f: Uint8Array) => (f[1] = 0x41), 'payload frame at byte 1: bad magic (expected "OMXP", got bytes 0x4f 0x41 0x58 0x50)', 1],
    ['newer framing version', (f: Uint8Array) => (f[4] = 2), 'payload frame at byte 4: framing version 2 is newer than this omnirx (1)', 4],
    ['unknown flags', (f: Uint8Array) => (f[6] = 1), 'payload frame at byte 6: unknown flags 0x1 (this omnirx knows none)', 6],
    [
      'a flipped body byte',
      (f: Uint8Array) => (f[f.length - 9] ^= 0xff),
      /^payload frame at byte 20: checksum mismatch \(frame says 0x[0-9a-f]+, bytes give 0x[0-9a-f]+\)$/,
      20,
    ],
  ])('refuses %s, naming the byte offset', (_label, edit, message, offset) => {
    const frame = encodePayload(samplePayload());
    edit(frame);
    const e = payloadError(() => decodePayload(frame));
    if (typeof message === 'string') expect(e.message).toBe(message);
    else expect(e.message).toMatch(message);
    expect(e.byteOffset).toBe(offset);
  });

  it('refuses truncated frames and trailing bytes', () => {
    const frame = encodePayload(samplePayload());
    expect(payloadError(() => decodePayload(frame.subarray(0, 10))).message).toBe(
      'payload frame at byte 10: truncated: 10 bytes, shorter than the 24-byte fixed header',
    );
    expect(payloadError(() => decodePayload(frame.subarray(0, 100))).message).toBe(
      `payload frame at byte 100: truncated: it declares ${frame.length} bytes (at byte 8) but only 100 are present`,
    );
    const longer = new Uint8Array(frame.length + 3);
    longer.set(frame);
    expect(payloadError(() => decodePayload(longer)).message).toBe(`payload frame at byte ${frame.length}: 3 bytes follow the end of the frame`);
  });

  it('refuses a header length past the end', () => {
    const frame = encodePayload(samplePayload());
    new DataView(frame.buffer).setUint32(16, frame.length, true);
    expect(payloadError(() => decodePayload(reseal(frame))).message).toBe(
      `payload frame at byte 16: header length ${frame.length} runs past the frame end (byte ${frame.length})`,
    );
  });

  it('refuses a header that is not JSON', () => {
    const frame = encodePayload(samplePayload());
    frame[24] = 0x7b + 1; // '{' → '|'
    const e = payloadError(() => decodePayload(reseal(frame)));
    expect(e.message).toMatch(/^payload frame header at byte 24: not valid UTF-8 JSON \(Unexpected token/);
    expect(e.byteOffset).toBe(24);
  });

  it('refuses a newer payload schema version inside a sound frame', () => {
    const frame = withHeader(encodePayload(samplePayload()), (h) => (h.schemaVersion = 2));
    expect(payloadError(() => decodePayload(frame)).message).toBe('payload frame header at byte 24: payload schema version 2 is newer than this omnirx (1)');
  });

  it('refuses out-of-range, misaligned, overlapping and mis-sized tensors', () => {
    const frame = encodePayload(samplePayload());
    const tensors = (h: Record<string, unknown>) => h.tensors as Array<Record<string, unknown>>;
    const bodyStart = frame.length - 24 - 8; // latents (24 bytes) then mask (5 → 8 bytes)
    const past = withHeader(frame, (h) => (tensors(h)[1]!.offset = 32));
    expect(payloadError(() => decodePayload(past)).message).toBe(
      `tensor "mask" at byte ${bodyStart + 32}: its 5 bytes run past the frame end (byte ${frame.length})`,
    );
    const overlap = withHeader(frame, (h) => (tensors(h)[1]!.offset = 16));
    expect(payloadError(() => decodePayload(overlap)).message).toBe(
      `tensor "mask" at byte ${bodyStart + 16} overlaps tensor "latents" (bytes ${bodyStart}..${bodyStart + 24})`,
    );
    const misaligned = withHeader(frame, (h) => (tensors(h)[1]!.offset = 25));
    expect(payloadError(() => decodePayload(misaligned)).message).toMatch(
      /^payload frame header \(byte 24\): tensors\.1 \("mask"\) has offset 25 \/ length 5;/,
    );
    const missized = withHeader(frame, (h) => (tensors(h)[0]!.shape = [3, 2].map((d) => d + 1)));
    expect(payloadError(() => decodePayload(missized)).message).toBe(
      `tensor "latents" at byte ${bodyStart}: shape [4, 3] of float32 is 48 bytes, but the frame gives it 24 bytes`,
    );
  });
});

describe('PayloadFrameReader', () => {
  const frames = [encodePayload(samplePayload('a', 0)), encodePayload(samplePayload('b', 10)), encodePayload(samplePayload('c', 20))];
  const stream = Buffer.concat(frames);

  it.each([1, 3, 7, 16, 17, 100, stream.length])('reassembles frames cut every %i bytes', (cut) => {
    const reader = new PayloadFrameReader(1 << 20);
    const ids: string[] = [];
    for (let i = 0; i < stream.length; i += cut) {
      for (const r of reader.push(stream.subarray(i, i + cut))) {
        expect(r.ok).toBe(true);
        if (r.ok) {
          ids.push(r.payload.requestId);
          expect(r.payload.tensors.latents!.bytes.byteOffset % 8).toBe(0);
        }
      }
    }
    reader.end();
    expect(ids).toEqual(['a', 'b', 'c']);
    expect(reader.bufferedBytes).toBe(0);
  });

  it('rejects a bad frame and goes on with the next one', () => {
    const bad = withHeader(frames[1]!, (h) => (h.schemaVersion = 2));
    const reader = new PayloadFrameReader(1 << 20);
    const results = reader.push(Buffer.concat([frames[0]!, bad, frames[2]!]));
    expect(results.map((r) => (r.ok ? r.payload.requestId : r.error.message))).toEqual([
      'a',
      `frame at stream byte ${frames[0]!.length}: payload frame header at byte 24: payload schema version 2 is newer than this omnirx (1)`,
      'c',
    ]);
    const err = results[1]!;
    expect(err.ok ? -1 : err.error.byteOffset).toBe(frames[0]!.length + 24);
  });

  it('throws on garbage, naming the stream byte offset', () => {
    const reader = new PayloadFrameReader(1 << 20);
    expect(reader.push(frames[0]!).length).toBe(1);
    const e = payloadError(() => reader.push(Buffer.from('GET / HTTP/1.1\r\n')));
    expect(e.message).toBe(`payload frame at byte ${frames[0]!.length}: bad magic (expected "OMXP", got bytes 0x47 0x45 0x54 0x20)`);
    expect(e.byteOffset).toBe(frames[0]!.length);
  });

  it('refuses a frame larger than the limit before buffering its body', () => {
    const reader = new PayloadFrameReader(64);
    const e = payloadError(() => reader.push(frames[0]!.subarray(0, 16)));
    expect(e.message).toBe(`payload stream at byte 8: a frame of ${frames[0]!.length} bytes exceeds the 64-byte limit`);
    expect(reader.bufferedBytes).toBe(16);
  });

  it('reports a stream that ends inside a frame', () => {
    const reader = new PayloadFrameReader(1 << 20);
    expect(reader.push(stream.subarray(0, frames[0]!.length + 40)).length).toBe(1);
    expect(payloadError(() => reader.end()).message).toBe(
      `payload stream at byte ${frames[0]!.length + 40}: truncated: the stream ended 40 bytes into a frame of ${frames[1]!.length} bytes (starting at byte ${frames[0]!.length})`,
    );
  });
});
