import { OmniError } from '../../src/errors';
import { box, fullBox, initSegment, mediaSegment, MOOF_BYTES, NON_SYNC_SAMPLE_FLAGS, SYNC_SAMPLE_FLAGS } from '../../src/media/fmp4';
import { avcCodecString, joinAvcc, parseAvcDecoderConfig, parseSps, splitAvcc, toAnnexB } from '../../src/media/nal';

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ''), 'hex'));

/** x264 ultrafast, 64x64 yuv420p: Constrained Baseline, level 1.0. */
const SPS_64 = hex('6742c00ada109b011000000300100000030108f1226a');
const PPS_64 = hex('68ce0fc8');
/** x264 medium, 320x240 yuv420p: High, level 1.2. */
const SPS_320x240_HIGH = hex('6764000cacd94141fb011000000300100000030100f1429960');
const PPS_HIGH = hex('68ebe3cb22c0');
/** x264 ultrafast, 98x50: 112x64 coded, cropped by 14 and 14 pixels. */
const SPS_98x50 = hex('6742c00ada1c9e2223011000000300100000030100f1226a');

interface Box {
  type: string;
  offset: number;
  size: number;
  children?: Box[];
}

const CONTAINERS = new Set(['moov', 'trak', 'mdia', 'minf', 'stbl', 'dinf', 'mvex', 'moof', 'traf']);

/** Walks the box tree of `buf[start, end)`. */
function walk(buf: Uint8Array, start = 0, end = buf.length): Box[] {
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Box[] = [];
  for (let off = start; off < end;) {
    const size = view.readUInt32BE(off);
    const type = view.toString('latin1', off + 4, off + 8);
    const b: Box = { type, offset: off, size };
    if (CONTAINERS.has(type)) b.children = walk(buf, off + 8, off + size);
    out.push(b);
    off += size;
  }
  return out;
}

function find(boxes: Box[], path: string): Box {
  const [head, ...rest] = path.split('/');
  const b = boxes.find((x) => x.type === head);
  if (!b) throw new Error(`no ${head} box`);
  return rest.length === 0 ? b : find(b.children ?? [], rest.join('/'));
}

const u32At = (buf: Uint8Array, off: number) => Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).readUInt32BE(off);
const u16At = (buf: Uint8Array, off: number) => Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).readUInt16BE(off);

function expectInvalid(fn: () => unknown, param: string, message: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(OmniError);
  expect((err as OmniError).code).toBe('OMNIRX_ERR_INVALID_REQUEST');
  expect((err as OmniError).param).toBe(param);
  expect((err as OmniError).message).toMatch(message);
}

describe('box helpers', () => {
  it('write the size (header included), the type and the payload', () => {
    expect(Array.from(box('free', Uint8Array.of(1, 2)))).toEqual([0, 0, 0, 10, 0x66, 0x72, 0x65, 0x65, 1, 2]);
    expect(Array.from(fullBox('abcd', 1, 0x020304))).toEqual([0, 0, 0, 12, 0x61, 0x62, 0x63, 0x64, 1, 2, 3, 4]);
  });
  it('reject a type that is not 4 characters', () => {
    expectInvalid(() => box('moo'), 'type', /4 characters; got "moo"/);
  });
});

describe('parseSps and the codec string', () => {
  it('reads profile, level and picture size of real x264 parameter sets', () => {
    expect(parseSps(SPS_64)).toEqual({
      profileIdc: 66,
      constraintFlags: 0xc0,
      levelIdc: 10,
      chromaFormatIdc: 1,
      bitDepthLuma: 8,
      bitDepthChroma: 8,
      width: 64,
      height: 64,
    });
    expect(parseSps(SPS_320x240_HIGH)).toEqual({
      profileIdc: 100,
      constraintFlags: 0,
      levelIdc: 12,
      chromaFormatIdc: 1,
      bitDepthLuma: 8,
      bitDepthChroma: 8,
      width: 320,
      height: 240,
    });
    expect(parseSps(SPS_98x50)).toMatchObject({ width: 98, height: 50 });
  });
  it('gives avc1.PPCCLL in upper-case hex', () => {
    expect(avcCodecString(SPS_64)).toBe('avc1.42C00A');
    expect(avcCodecString(SPS_320x240_HIGH)).toBe('avc1.64000C');
  });
  it('rejects an SPS that is too short, of another NAL type, or cut off', () => {
    expectInvalid(() => avcCodecString(hex('6742c0')), 'sps', /3 bytes/);
    expectInvalid(() => parseSps(hex('6742c0')), 'sps', /3 bytes; an SPS has at least 4/);
    expectInvalid(() => parseSps(PPS_64), 'sps', /byte 0 is NAL type 8, expected 7/);
    expectInvalid(() => parseSps(SPS_64.subarray(0, 6)), 'sps', /ends at byte 5 of its payload/);
  });
});

describe('AVCC and Annex-B', () => {
  it('split and join are inverse; toAnnexB puts a 4-byte start code before each unit', () => {
    const units = [hex('6588'), hex('41')];
    const avcc = joinAvcc(units);
    expect(Array.from(avcc)).toEqual([0, 0, 0, 2, 0x65, 0x88, 0, 0, 0, 1, 0x41]);
    expect(splitAvcc(avcc).map((u) => Array.from(u))).toEqual([[0x65, 0x88], [0x41]]);
    expect(Array.from(toAnnexB(units))).toEqual([0, 0, 0, 1, 0x65, 0x88, 0, 0, 0, 1, 0x41]);
  });
  it('names the byte offset of a malformed sample', () => {
    expectInvalid(() => splitAvcc(new Uint8Array(0)), 'sample', /empty \(0 bytes\)/);
    expectInvalid(() => splitAvcc(hex('00000001 65 000000')), 'sample', /prefix at byte 5 is cut off/);
    expectInvalid(() => splitAvcc(hex('00000001 65 00000000')), 'sample', /zero-length NAL unit at byte 5/);
    expectInvalid(() => splitAvcc(hex('00000009 6588')), 'sample', /NAL unit at byte 0 claims 9 bytes but only 2 follow/);
  });
  it('parses an AVCDecoderConfigurationRecord and names where it is cut off', () => {
    const record = hex(`0142c00affe10016${Buffer.from(SPS_64).toString('hex')}010004${Buffer.from(PPS_64).toString('hex')}`);
    const cfg = parseAvcDecoderConfig(record);
    expect(cfg.lengthSize).toBe(4);
    expect(cfg.sps.map((s) => Array.from(s))).toEqual([Array.from(SPS_64)]);
    expect(cfg.pps.map((s) => Array.from(s))).toEqual([Array.from(PPS_64)]);
    expectInvalid(() => parseAvcDecoderConfig(record.subarray(0, 20)), 'avcC', /needs 22 byte\(s\) at byte 8 but the record is 20 bytes/);
    expectInvalid(() => parseAvcDecoderConfig(hex('0242c00affe1')), 'avcC', /configurationVersion at byte 0 is 2/);
  });
});

describe('initSegment', () => {
  const init = initSegment({ width: 64, height: 64, timescale: 90000, sps: SPS_64, pps: PPS_64 });
  const tree = walk(init);

  it('has the hand-computed box sizes (ftyp 32 + moov 628)', () => {
    expect(init.length).toBe(660);
    expect(tree.map((b) => [b.type, b.size])).toEqual([
      ['ftyp', 32],
      ['moov', 628],
    ]);
    expect(find(tree, 'moov').children!.map((b) => [b.type, b.size])).toEqual([
      ['mvhd', 108],
      ['trak', 472],
      ['mvex', 40],
    ]);
    expect(find(tree, 'moov/trak').children!.map((b) => [b.type, b.size])).toEqual([
      ['tkhd', 92],
      ['mdia', 372],
    ]);
    expect(find(tree, 'moov/trak/mdia').children!.map((b) => [b.type, b.size])).toEqual([
      ['mdhd', 32],
      ['hdlr', 45],
      ['minf', 287],
    ]);
    expect(find(tree, 'moov/trak/mdia/minf').children!.map((b) => [b.type, b.size])).toEqual([
      ['vmhd', 20],
      ['dinf', 36],
      ['stbl', 223],
    ]);
    expect(find(tree, 'moov/trak/mdia/minf/stbl').children!.map((b) => [b.type, b.size])).toEqual([
      ['stsd', 147],
      ['stts', 16],
      ['stsc', 16],
      ['stsz', 20],
      ['stco', 16],
    ]);
    expect(find(tree, 'moov/mvex').children!.map((b) => [b.type, b.size])).toEqual([['trex', 32]]);
  });

  it('writes the brands, timescales, track id, picture size and the avcC record at their offsets', () => {
    expect(Buffer.from(init.subarray(8, 32)).toString('latin1')).toBe('iso5\0\0\x02\0iso5iso6avc1mp41');
    const mvhd = find(tree, 'moov/mvhd').offset;
    expect(u32At(init, mvhd + 20)).toBe(90000);
    expect(u32At(init, mvhd + 104)).toBe(2); // next_track_ID
    const tkhd = find(tree, 'moov/trak/tkhd').offset;
    expect(u32At(init, tkhd + 8) & 0xffffff).toBe(3); // enabled | in movie
    expect(u32At(init, tkhd + 20)).toBe(1); // track_ID
    expect([u32At(init, tkhd + 84), u32At(init, tkhd + 88)]).toEqual([64 << 16, 64 << 16]);
    const mdhd = find(tree, 'moov/trak/mdia/mdhd').offset;
    expect(u32At(init, mdhd + 20)).toBe(90000);
    expect(Buffer.from(init.subarray(find(tree, 'moov/trak/mdia/hdlr').offset + 16, find(tree, 'moov/trak/mdia/hdlr').offset + 20)).toString('latin1')).toBe(
      'vide',
    );
    const stsd = find(tree, 'moov/trak/mdia/minf/stbl/stsd').offset;
    const avc1 = stsd + 16;
    expect(Buffer.from(init.subarray(avc1 + 4, avc1 + 8)).toString('latin1')).toBe('avc1');
    expect([u16At(init, avc1 + 32), u16At(init, avc1 + 34)]).toEqual([64, 64]);
    const avcC = avc1 + 86;
    expect(u32At(init, avcC)).toBe(45);
    const record = init.subarray(avcC + 8, avcC + 45);
    expect(Array.from(record.subarray(0, 8))).toEqual([1, 0x42, 0xc0, 0x0a, 0xff, 0xe1, 0, 22]);
    expect(parseAvcDecoderConfig(record)).toEqual({ lengthSize: 4, sps: [SPS_64], pps: [PPS_64] });
    const trex = find(tree, 'moov/mvex/trex').offset;
    expect([u32At(init, trex + 12), u32At(init, trex + 16)]).toEqual([1, 1]);
  });

  it('appends chroma format and bit depths to avcC for a High profile SPS', () => {
    const high = initSegment({ width: 320, height: 240, timescale: 1000, sps: SPS_320x240_HIGH, pps: PPS_HIGH });
    const avcC = find(walk(high), 'moov/trak/mdia/minf/stbl/stsd').offset + 16 + 86;
    // 8 header + 6 + 2 + 25 (SPS) + 1 + 2 + 6 (PPS) + 4 (chroma 4:2:0, 8-bit luma and chroma, no SPS extensions)
    expect(u32At(high, avcC)).toBe(54);
    expect(Array.from(high.subarray(avcC + 50, avcC + 54))).toEqual([0xfd, 0xf8, 0xf8, 0]);
  });

  it('rejects sizes that differ from the SPS, bad timescales and bad parameter sets', () => {
    const ok = { width: 64, height: 64, timescale: 90000, sps: SPS_64, pps: PPS_64 };
    expectInvalid(() => initSegment({ ...ok, width: 66 }), 'width', /66x64 given but the SPS describes 64x64/);
    expectInvalid(() => initSegment({ ...ok, height: 0 }), 'height', /\[1, 65535\]; got 0/);
    expectInvalid(() => initSegment({ ...ok, timescale: 0 }), 'timescale', /got 0/);
    expectInvalid(() => initSegment({ ...ok, sps: hex('6742') }), 'sps', /2 bytes/);
    expectInvalid(() => initSegment({ ...ok, pps: new Uint8Array(0) }), 'pps', /non-empty/);
    expectInvalid(() => initSegment({ ...ok, pps: SPS_64 }), 'pps', /NAL type 7, expected 8/);
  });
});

describe('mediaSegment', () => {
  const sample = hex('00000003 658884');

  it('writes moof (100 bytes) + mdat with the trun data offset pointing at the sample', () => {
    const seg = mediaSegment({ sequenceNumber: 7, baseMediaDecodeTime: 2 ** 33 + 5, duration: 11250, sample, keyframe: true });
    expect(seg.length).toBe(MOOF_BYTES + 8 + 7);
    const tree = walk(seg);
    expect(tree.map((b) => [b.type, b.size])).toEqual([
      ['moof', 100],
      ['mdat', 15],
    ]);
    expect(find(tree, 'moof').children!.map((b) => [b.type, b.size])).toEqual([
      ['mfhd', 16],
      ['traf', 76],
    ]);
    expect(find(tree, 'moof/traf').children!.map((b) => [b.type, b.offset, b.size])).toEqual([
      ['tfhd', 32, 16],
      ['tfdt', 48, 20],
      ['trun', 68, 32],
    ]);
    expect(u32At(seg, 20)).toBe(7); // mfhd sequence_number
    expect(u32At(seg, 40) & 0xffffff).toBe(0x020000); // tfhd default-base-is-moof
    expect(u32At(seg, 44)).toBe(1); // track_ID
    expect(seg[56]).toBe(1); // tfdt version 1: 64-bit time
    expect(Buffer.from(seg).readBigUInt64BE(60)).toBe(BigInt(2 ** 33 + 5));
    expect(u32At(seg, 76) & 0xffffff).toBe(0x000701);
    expect(u32At(seg, 80)).toBe(1); // sample_count
    const dataOffset = u32At(seg, 84);
    expect(dataOffset).toBe(108);
    expect([u32At(seg, 88), u32At(seg, 92), u32At(seg, 96)]).toEqual([11250, 7, SYNC_SAMPLE_FLAGS]);
    expect(Array.from(seg.subarray(dataOffset))).toEqual(Array.from(sample));
  });

  it('marks a delta frame as a non-sync sample that depends on others', () => {
    const seg = mediaSegment({ sequenceNumber: 1, baseMediaDecodeTime: 0, duration: 1, sample, keyframe: false });
    expect(u32At(seg, 96)).toBe(NON_SYNC_SAMPLE_FLAGS);
    expect(NON_SYNC_SAMPLE_FLAGS).toBe(0x01010000);
  });

  it('rejects an empty or malformed sample and out-of-range numbers', () => {
    const ok = { sequenceNumber: 1, baseMediaDecodeTime: 0, duration: 100, sample, keyframe: true };
    expectInvalid(() => mediaSegment({ ...ok, sample: new Uint8Array(0) }), 'sample', /empty \(0 bytes\)/);
    expectInvalid(() => mediaSegment({ ...ok, sample: hex('0000000a 65') }), 'sample', /at byte 0 claims 10 bytes but only 1 follow/);
    expectInvalid(() => mediaSegment({ ...ok, sequenceNumber: 0 }), 'sequenceNumber', /\[1, 4294967295\]; got 0/);
    expectInvalid(() => mediaSegment({ ...ok, duration: 0 }), 'duration', /got 0/);
    expectInvalid(() => mediaSegment({ ...ok, baseMediaDecodeTime: -1 }), 'baseMediaDecodeTime', /got -1/);
  });
});
