import { OmniError } from '../errors';
import { NAL_TYPE, nalType, parseSps, splitAvcc } from './nal';

/**
 * A fragmented MP4 writer (ISO/IEC 14496-12 ISO BMFF, 14496-15 for AVC) for one H.264 video track: an init
 * segment (ftyp + moov with an empty sample table and mvex) and one media segment (moof + mdat) per sample, the
 * layout Media Source Extensions and ffmpeg read. Pure: bytes in, bytes out. Layout and offsets:
 * docs/streaming.md.
 */

/** The only track of the streams written here. */
export const TRACK_ID = 1;

/** Size of the moof box {@link mediaSegment} writes (one traf with one trun of one sample), bytes. */
export const MOOF_BYTES = 100;

/** Sample flags (14496-12 §8.8.3.1) of a sync sample: sample_depends_on = 2 (depends on no other sample). */
export const SYNC_SAMPLE_FLAGS = 0x02000000;
/** Sample flags of a non-sync sample: sample_depends_on = 1, sample_is_non_sync_sample = 1. */
export const NON_SYNC_SAMPLE_FLAGS = 0x01010000;

/** trun flags: data-offset-present | sample-duration-present | sample-size-present | sample-flags-present. */
const TRUN_FLAGS = 0x000701;
/** tfhd flags: default-base-is-moof (data offsets count from the start of the moof). */
const TFHD_DEFAULT_BASE_IS_MOOF = 0x020000;

function invalid(param: string, message: string): OmniError {
  return new OmniError('OMNIRX_ERR_INVALID_REQUEST', message, { param });
}

function u8(v: number): Uint8Array {
  return Uint8Array.of(v & 0xff);
}
function u16(v: number): Uint8Array {
  return Uint8Array.of((v >>> 8) & 0xff, v & 0xff);
}
function u32(v: number): Uint8Array {
  return Uint8Array.of((v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
}
function u64(v: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(v));
  return out;
}
function zeros(n: number): Uint8Array {
  return new Uint8Array(n);
}
function ascii(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** A box: 32-bit size (header included, bytes), 4-character type, payload. */
export function box(type: string, ...payload: Uint8Array[]): Uint8Array {
  if (type.length !== 4) throw invalid('type', `a box type has 4 characters; got "${type}"`);
  const body = concat(payload);
  return concat([u32(8 + body.length), ascii(type), body]);
}

/** A full box: a box whose payload starts with an 8-bit version and 24-bit flags. */
export function fullBox(type: string, version: number, flags: number, ...payload: Uint8Array[]): Uint8Array {
  return box(type, u8(version), u8(flags >>> 16), u16(flags & 0xffff), ...payload);
}

/** The unity transformation matrix of mvhd/tkhd (16.16 and 2.30 fixed point). */
const UNITY_MATRIX = concat([u32(0x00010000), u32(0), u32(0), u32(0), u32(0x00010000), u32(0), u32(0), u32(0), u32(0x40000000)]);

/** Options of {@link initSegment}. */
export interface InitSegmentOptions {
  /** Picture width, pixels (must match the SPS). */
  width: number;
  /** Picture height, pixels (must match the SPS). */
  height: number;
  /** Ticks per second of the media timeline (mdhd); sample durations and decode times count in these. */
  timescale: number;
  /** Sequence parameter set NAL unit, header byte included (no start code, no length prefix). */
  sps: Uint8Array;
  /** Picture parameter set NAL unit, header byte included. */
  pps: Uint8Array;
}

function checkDimension(name: 'width' | 'height', v: number): void {
  if (!Number.isSafeInteger(v) || v < 1 || v > 0xffff) throw invalid(name, `initSegment: ${name} must be an integer in [1, 65535]; got ${String(v)}`);
}

function checkUint32(param: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min || v > 0xffffffff) throw invalid(param, `${param} must be an integer in [${min}, 4294967295]; got ${String(v)}`);
}

/** The AVCDecoderConfigurationRecord (avcC payload) for one SPS and one PPS, with 4-byte NAL lengths. */
function avcC(sps: Uint8Array, pps: Uint8Array): Uint8Array {
  const info = parseSps(sps);
  const parts = [u8(1), u8(sps[1]!), u8(sps[2]!), u8(sps[3]!), u8(0xfc | 3), u8(0xe0 | 1), u16(sps.length), sps, u8(1), u16(pps.length), pps];
  // 14496-15 §5.3.3.1.2: High profiles append chroma format and bit depths (no SPS extensions).
  if ([100, 110, 122, 144].includes(info.profileIdc)) {
    parts.push(u8(0xfc | info.chromaFormatIdc), u8(0xf8 | (info.bitDepthLuma - 8)), u8(0xf8 | (info.bitDepthChroma - 8)), u8(0));
  }
  return box('avcC', ...parts);
}

/**
 * The init segment of a one-track H.264 fMP4 stream: `ftyp` (iso5; iso6, avc1, mp41) and `moov` with mvhd,
 * trak (tkhd, mdia: mdhd, hdlr `vide`, minf: vmhd, dinf/dref, stbl: stsd/avc1/avcC and empty stts, stsc, stsz,
 * stco) and mvex/trex. Durations are 0 (unknown, live); track id {@link TRACK_ID}.
 *
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (param names the field) when width/height are not in [1, 65535] or
 *   differ from the SPS's picture size, timescale is not a positive 32-bit integer, the SPS is shorter than 4 bytes
 *   or not NAL type 7 or cut off, or the PPS is empty or not NAL type 8.
 */
export function initSegment(options: InitSegmentOptions): Uint8Array {
  const { width, height, timescale, sps, pps } = options;
  checkDimension('width', width);
  checkDimension('height', height);
  checkUint32('timescale', timescale, 1);
  if (!(sps instanceof Uint8Array)) throw invalid('sps', 'initSegment: sps must be a Uint8Array');
  if (!(pps instanceof Uint8Array) || pps.length === 0) throw invalid('pps', 'initSegment: pps must be a non-empty Uint8Array');
  if (nalType(pps) !== NAL_TYPE.PPS) throw invalid('pps', `initSegment: pps byte 0 is NAL type ${nalType(pps)}, expected ${NAL_TYPE.PPS} (PPS)`);
  if (sps.length > 0xffff || pps.length > 0xffff) throw invalid('sps', 'initSegment: a parameter set longer than 65535 bytes cannot be stored in avcC');
  const info = parseSps(sps);
  if (info.width !== width || info.height !== height) {
    throw invalid('width', `initSegment: ${width}x${height} given but the SPS describes ${info.width}x${info.height} pictures`);
  }

  const ftyp = box('ftyp', ascii('iso5'), u32(512), ascii('iso5'), ascii('iso6'), ascii('avc1'), ascii('mp41'));
  const mvhd = fullBox(
    'mvhd',
    0,
    0,
    u32(0),
    u32(0),
    u32(timescale),
    u32(0),
    u32(0x00010000),
    u16(0x0100),
    zeros(10),
    UNITY_MATRIX,
    zeros(24),
    u32(TRACK_ID + 1),
  );
  const tkhd = fullBox(
    'tkhd',
    0,
    0x000003,
    u32(0),
    u32(0),
    u32(TRACK_ID),
    u32(0),
    u32(0),
    zeros(8),
    u16(0),
    u16(0),
    u16(0),
    u16(0),
    UNITY_MATRIX,
    u32(width * 0x10000),
    u32(height * 0x10000),
  );
  // Language "und": three 5-bit letters, each minus 0x60.
  const mdhd = fullBox('mdhd', 0, 0, u32(0), u32(0), u32(timescale), u32(0), u16(0x55c4), u16(0));
  const hdlr = fullBox('hdlr', 0, 0, u32(0), ascii('vide'), zeros(12), ascii('VideoHandler\0'));
  const vmhd = fullBox('vmhd', 0, 1, u16(0), zeros(6));
  const dinf = box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1)));
  const avc1 = box(
    'avc1',
    zeros(6),
    u16(1), // reserved, data_reference_index
    zeros(16), // pre_defined, reserved, pre_defined[3]
    u16(width),
    u16(height),
    u32(0x00480000),
    u32(0x00480000), // 72 dpi
    u32(0),
    u16(1), // reserved, frame_count
    zeros(32), // compressorname
    u16(0x0018),
    u16(0xffff), // depth, pre_defined = -1
    avcC(sps, pps),
  );
  const stbl = box(
    'stbl',
    fullBox('stsd', 0, 0, u32(1), avc1),
    fullBox('stts', 0, 0, u32(0)),
    fullBox('stsc', 0, 0, u32(0)),
    fullBox('stsz', 0, 0, u32(0), u32(0)),
    fullBox('stco', 0, 0, u32(0)),
  );
  const trak = box('trak', tkhd, box('mdia', mdhd, hdlr, box('minf', vmhd, dinf, stbl)));
  const mvex = box('mvex', fullBox('trex', 0, 0, u32(TRACK_ID), u32(1), u32(0), u32(0), u32(0)));
  return concat([ftyp, box('moov', mvhd, trak, mvex)]);
}

/** Options of {@link mediaSegment}. */
export interface MediaSegmentOptions {
  /** mfhd sequence number: 1 for the first fragment, one more for each next. */
  sequenceNumber: number;
  /** Decode time of the sample, timescale ticks (tfdt, 64-bit). */
  baseMediaDecodeTime: number;
  /** Duration of the sample, timescale ticks (≥ 1). */
  duration: number;
  /** One access unit in AVCC form (4-byte big-endian NAL lengths). */
  sample: Uint8Array;
  /** True for a sync (IDR) sample. */
  keyframe: boolean;
}

/**
 * One media segment holding one sample: `moof` ({@link MOOF_BYTES} bytes: mfhd; traf with tfhd
 * default-base-is-moof, tfdt version 1, trun with data offset, duration, size and flags) then `mdat`. The trun
 * data offset is `MOOF_BYTES + 8`, the first byte of the sample inside mdat counted from the start of the moof.
 *
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (param names the field) when sequenceNumber or duration is not in
 *   [1, 2³²−1], baseMediaDecodeTime is not a non-negative safe integer, or the sample is empty or not well-formed
 *   AVCC (the message names the byte offset).
 */
export function mediaSegment(options: MediaSegmentOptions): Uint8Array {
  const { sequenceNumber, baseMediaDecodeTime, duration, sample, keyframe } = options;
  checkUint32('sequenceNumber', sequenceNumber, 1);
  checkUint32('duration', duration, 1);
  if (!Number.isSafeInteger(baseMediaDecodeTime) || baseMediaDecodeTime < 0)
    throw invalid('baseMediaDecodeTime', `baseMediaDecodeTime must be a non-negative safe integer; got ${String(baseMediaDecodeTime)}`);
  if (!(sample instanceof Uint8Array)) throw invalid('sample', 'sample must be a Uint8Array of AVCC bytes');
  splitAvcc(sample);
  const mdatBytes = 8 + sample.length;
  if (MOOF_BYTES + mdatBytes > 0xffffffff) throw invalid('sample', `sample of ${sample.length} bytes does not fit a 32-bit mdat`);
  const traf = box(
    'traf',
    fullBox('tfhd', 0, TFHD_DEFAULT_BASE_IS_MOOF, u32(TRACK_ID)),
    fullBox('tfdt', 1, 0, u64(baseMediaDecodeTime)),
    fullBox('trun', 0, TRUN_FLAGS, u32(1), u32(MOOF_BYTES + 8), u32(duration), u32(sample.length), u32(keyframe ? SYNC_SAMPLE_FLAGS : NON_SYNC_SAMPLE_FLAGS)),
  );
  const moof = box('moof', fullBox('mfhd', 0, 0, u32(sequenceNumber)), traf);
  if (moof.length !== MOOF_BYTES) throw new OmniError('OMNIRX_ERR_INTERNAL', `moof is ${moof.length} bytes, expected ${MOOF_BYTES}`);
  const out = new Uint8Array(MOOF_BYTES + mdatBytes);
  out.set(moof, 0);
  out.set(u32(mdatBytes), MOOF_BYTES);
  out.set(ascii('mdat'), MOOF_BYTES + 4);
  out.set(sample, MOOF_BYTES + 8);
  return out;
}
