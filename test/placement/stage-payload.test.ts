import { OmniError } from '../../src/errors';
import { loadNative } from '../../src/native/binding';
import {
  float32Elements,
  float32Tensor,
  nativeTensorToPayload,
  parseStagePayload,
  PayloadError,
  payloadToNativeTensor,
  PAYLOAD_LIMITS,
} from '../../src/pipeline/stage-payload';
import { samplePayload } from './payload-fixtures';

function payloadError(f: () => unknown): PayloadError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(PayloadError);
    expect((e as OmniError).code).toBe('OMNIRX_ERR_PAYLOAD');
    return e as PayloadError;
  }
  throw new Error('expected a PayloadError');
}

describe('DiffusionStagePayload', () => {
  it('accepts a valid payload and keeps tensor bytes by reference', () => {
    const p = samplePayload();
    const parsed = parseStagePayload(p);
    expect(parsed.tensors.latents!.bytes).toBe(p.tensors.latents!.bytes);
    expect(parsed.metadata).toEqual({ chunk: 0, sigmas: [1, 0.5], nested: { ok: true, tag: null } });
  });

  it('names the tensor and both byte counts when shape × dtype size differs from the bytes', () => {
    const p = samplePayload();
    p.tensors.latents = { dtype: 'float32', shape: [2, 4], bytes: new Uint8Array(24) };
    const e = payloadError(() => parseStagePayload(p));
    expect(e.message).toBe('stage payload: tensors.latents.bytes: tensor "latents" has shape [2, 4] of float32, which is 32 bytes, but carries 24 bytes');
    expect(e.param).toBe('tensors.latents.bytes');
  });

  it('refuses a newer schema version with a clear message', () => {
    const e = payloadError(() => parseStagePayload({ ...samplePayload(), schemaVersion: 2 }));
    expect(e.message).toBe('payload schema version 2 is newer than this omnirx (1)');
  });

  it.each([
    ['NaN', { x: NaN }, 'metadata.x is NaN, which JSON cannot carry'],
    ['Infinity in an array', { a: [1, Infinity] }, 'metadata.a.1 is Infinity, which JSON cannot carry'],
    ['undefined', { u: undefined }, 'metadata.u is a undefined, which JSON cannot carry'],
    ['a class instance', { d: new Date(0) }, 'metadata.d is not a plain object (a Date)'],
    ['a bigint', { b: 1n }, 'metadata.b is a bigint, which JSON cannot carry'],
  ])('refuses metadata with %s', (_label, metadata, message) => {
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), metadata })).message).toBe(`stage payload: metadata: ${message}`);
  });

  it('bounds metadata depth and size', () => {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < PAYLOAD_LIMITS.maxMetadataDepth + 1; i++) deep = { d: deep };
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), metadata: deep })).message).toMatch(/nests deeper than 16 levels$/);
    const big = { s: 'x'.repeat(PAYLOAD_LIMITS.maxMetadataBytes) };
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), metadata: big })).message).toBe(
      `stage payload: metadata: metadata is ${PAYLOAD_LIMITS.maxMetadataBytes + 8} bytes as JSON, more than the 65536-byte limit`,
    );
  });

  it('bounds tensor names, counts and ranks', () => {
    const t = { dtype: 'uint8' as const, shape: [1], bytes: new Uint8Array(1) };
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), tensors: { __proto__x: t } })).param).toBe('tensors.__proto__x');
    const many = Object.fromEntries(Array.from({ length: PAYLOAD_LIMITS.maxTensors + 1 }, (_, i) => [`t${i}`, t]));
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), tensors: many })).message).toBe('stage payload: tensors: more than 256 tensors');
    const rank9 = { dtype: 'uint8' as const, shape: [1, 1, 1, 1, 1, 1, 1, 1, 1], bytes: new Uint8Array(1) };
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), tensors: { r: rank9 } })).param).toBe('tensors.r.shape');
  });

  it('refuses unknown fields and stages', () => {
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), extra: 1 })).message).toMatch(/^stage payload: \(root\): Unrecognized key/);
    expect(payloadError(() => parseStagePayload({ ...samplePayload(), targetStage: 'render' })).param).toBe('targetStage');
  });
});

describe('tensor helpers', () => {
  it('wraps a Float32Array without copying and reads it back as a view', () => {
    const data = Float32Array.from([1, 2, 3, 4]);
    const t = float32Tensor(data, [2, 2]);
    expect(t.bytes.buffer).toBe(data.buffer);
    const back = float32Elements(t);
    expect(back.buffer).toBe(data.buffer);
    expect([...back]).toEqual([1, 2, 3, 4]);
  });

  it('copies when the bytes are not 4-byte aligned', () => {
    const raw = new Uint8Array(9);
    raw.set(new Uint8Array(Float32Array.from([7, 8]).buffer), 1);
    const back = float32Elements({ dtype: 'float32', shape: [2], bytes: raw.subarray(1) });
    expect([...back]).toEqual([7, 8]);
  });

  it('refuses a length that does not match the shape, and a non-float32 read', () => {
    expect(payloadError(() => float32Tensor(new Float32Array(3), [2, 2])).message).toBe('float32Tensor: 3 elements given for shape [2, 2] (4 elements)');
    expect(payloadError(() => float32Elements({ dtype: 'int32', shape: [1], bytes: new Uint8Array(4) }, 'ids')).message).toBe('ids is int32, not float32');
  });

  it('round-trips a NativeTensor, copying into a fresh one on receive', () => {
    const native = loadNative();
    const src = new native.Tensor([2, 3]);
    src.data.set([1, 2, 3, 4, 5, 6]);
    const wire = nativeTensorToPayload(src);
    const dst = payloadToNativeTensor(native, wire);
    src.data.fill(0);
    expect(dst.shape).toEqual([2, 3]);
    expect([...dst.data]).toEqual([1, 2, 3, 4, 5, 6]);
    src.dispose();
    dst.dispose();
  });
});
