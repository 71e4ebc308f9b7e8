import { relativePositionBucket } from '../../src/models/t5/encoder';
import { EOS_ID, PAD_ID, WordByteTokenizer } from '../../src/models/t5/tokenizer';
import { timestepEmbedding, wanRopeTables } from '../../src/models/wan/rope';

describe('WordByteTokenizer', () => {
  const tok = new WordByteTokenizer({ type: 'word-bytes', words: ['a', 'red', 'ball'] });

  it('maps known words to ids after the 259 reserved ids and appends eos, then pads', () => {
    const e = tok.encode('A red BALL', 6);
    expect(Array.from(e.ids)).toEqual([259, 260, 261, EOS_ID, PAD_ID, PAD_ID]);
    expect(e.length).toBe(4);
    expect(tok.vocabSize).toBe(262);
  });

  it('falls back to UTF-8 bytes for unknown words and punctuation', () => {
    // "hi" → 'h' (0x68) 'i' (0x69); "é" → 0xC3 0xA9; "!" → 0x21
    expect(Array.from(tok.encode('hi é!', 8).ids)).toEqual([3 + 0x68, 3 + 0x69, 3 + 0xc3, 3 + 0xa9, 3 + 0x21, EOS_ID, PAD_ID, PAD_ID]);
  });

  it('truncates but keeps eos; the empty prompt is just eos', () => {
    const e = tok.encode('a a a a a a', 3);
    expect(Array.from(e.ids)).toEqual([259, 259, EOS_ID]);
    expect(Array.from(tok.encode('', 3).ids)).toEqual([EOS_ID, PAD_ID, PAD_ID]);
  });
});

describe('T5 relative position buckets (hand-computed with HF T5Attention._relative_position_bucket, 32 buckets, max distance 128)', () => {
  it.each([
    [0, 0],
    [-1, 1],
    [-7, 7],
    [1, 17],
    [7, 23],
    // n = 8: 8 + floor(log(1)/log(16)·8) = 8 (negative side), 24 (positive side)
    [-8, 8],
    [8, 24],
    // n = 20: 8 + floor(log(2.5)/log(16)·8) = 8 + floor(2.643) = 10
    [-20, 10],
    // n = 200 (beyond max distance) → clamped to 15 / 31
    [-200, 15],
    [200, 31],
  ])('relative %i → bucket %i', (rel, bucket) => {
    expect(relativePositionBucket(rel, 32, 128)).toBe(bucket);
  });
});

describe('Wan rotary tables and timestep embedding', () => {
  it('splits D = 12 into frame 4 / height 4 / width 4 and rotates by pos·θ^(−2i/d)', () => {
    const { cos, sin } = wanRopeTables(2, 2, 3, 12, 10000);
    const half = 6;
    // token (f=1, h=1, w=2) = index 1·6 + 1·3 + 2 = 11
    const l = 11;
    const expected = [1 * 1, 1 * 10000 ** -0.5, 1 * 1, 1 * 10000 ** -0.5, 2 * 1, 2 * 10000 ** -0.5];
    for (let i = 0; i < half; i++) {
      expect(cos[l * half + i]).toBeCloseTo(Math.cos(expected[i]), 6);
      expect(sin[l * half + i]).toBeCloseTo(Math.sin(expected[i]), 6);
    }
    // token 0 has no rotation
    for (let i = 0; i < half; i++) expect(cos[i]).toBe(1);
  });

  it('timestep embedding is [cos(t·ωᵢ), sin(t·ωᵢ)] with ωᵢ = 10000^(−i/half)', () => {
    const e = timestepEmbedding(500, 8);
    const w = [1, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75];
    for (let i = 0; i < 4; i++) {
      expect(e[i]).toBeCloseTo(Math.cos(500 * w[i]), 5);
      expect(e[4 + i]).toBeCloseTo(Math.sin(500 * w[i]), 5);
    }
  });
});
