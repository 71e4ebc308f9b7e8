import { OmniError } from '../errors';

/**
 * H.264 NAL unit helpers: AVCC (length-prefixed) sample parsing, the AVCDecoderConfigurationRecord, the fields of
 * a sequence parameter set that a container needs, and the conversion to Annex-B for raw H.264 consumers.
 * ITU-T H.264 §7.3 (syntax) and ISO/IEC 14496-15 §5 (AVC file format).
 */

/** NAL unit types used here (H.264 Table 7-1). */
export const NAL_TYPE = { NON_IDR_SLICE: 1, IDR_SLICE: 5, SEI: 6, SPS: 7, PPS: 8, AUD: 9 } as const;

/** Bytes of the big-endian length prefix of every NAL unit in the AVCC samples omnirx emits. */
export const AVCC_LENGTH_SIZE = 4;

/** The NAL unit type of a NAL unit (its first byte's low 5 bits). */
export function nalType(nal: Uint8Array): number {
  return nal[0]! & 0x1f;
}

function malformed(what: string, message: string): OmniError {
  return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `malformed ${what}: ${message}`, { param: what });
}

/**
 * Splits an AVCC sample (each NAL unit prefixed by its big-endian length of `lengthSize` bytes) into NAL units.
 * The returned units are views into `sample` (no copy).
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST when the sample is empty, a prefix is cut off, a length is zero or
 *   runs past the end (the message names the byte offset).
 */
export function splitAvcc(sample: Uint8Array, lengthSize: number = AVCC_LENGTH_SIZE): Uint8Array[] {
  if (sample.length === 0) throw malformed('sample', 'empty (0 bytes)');
  const nals: Uint8Array[] = [];
  let off = 0;
  while (off < sample.length) {
    if (off + lengthSize > sample.length)
      throw malformed('sample', `${lengthSize}-byte NAL length prefix at byte ${off} is cut off (sample is ${sample.length} bytes)`);
    let len = 0;
    for (let i = 0; i < lengthSize; i++) len = len * 256 + sample[off + i]!;
    if (len === 0) throw malformed('sample', `zero-length NAL unit at byte ${off}`);
    const start = off + lengthSize;
    if (start + len > sample.length) throw malformed('sample', `NAL unit at byte ${off} claims ${len} bytes but only ${sample.length - start} follow`);
    nals.push(sample.subarray(start, start + len));
    off = start + len;
  }
  return nals;
}

/** Joins NAL units into one AVCC sample with {@link AVCC_LENGTH_SIZE}-byte big-endian length prefixes. */
export function joinAvcc(nals: readonly Uint8Array[]): Uint8Array {
  const total = nals.reduce((n, u) => n + AVCC_LENGTH_SIZE + u.length, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let off = 0;
  for (const u of nals) {
    view.setUint32(off, u.length);
    out.set(u, off + AVCC_LENGTH_SIZE);
    off += AVCC_LENGTH_SIZE + u.length;
  }
  return out;
}

/**
 * Converts NAL units to an Annex-B byte stream (each unit after a 4-byte start code `00 00 00 01`), the format
 * raw H.264 decoders such as WebCodecs' `VideoDecoder` without a `description` take. Pass SPS and PPS first for a
 * keyframe a decoder may start at.
 */
export function toAnnexB(nals: readonly Uint8Array[]): Uint8Array {
  const total = nals.reduce((n, u) => n + 4 + u.length, 0);
  const out = new Uint8Array(total);
  let off = 0;
  for (const u of nals) {
    out[off + 3] = 1;
    out.set(u, off + 4);
    off += 4 + u.length;
  }
  return out;
}

/** The parameter sets and NAL length size carried by an AVCDecoderConfigurationRecord (the `avcC` box payload). */
export interface AvcDecoderConfig {
  /** Bytes of each NAL length prefix in the samples this record describes (1, 2 or 4). */
  lengthSize: number;
  sps: Uint8Array[];
  pps: Uint8Array[];
}

/**
 * Parses an AVCDecoderConfigurationRecord (ISO/IEC 14496-15 §5.3.3.1), e.g. the sequence header an FLV stream
 * carries. Views into `record`.
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST naming the byte offset where the record is cut off or invalid.
 */
export function parseAvcDecoderConfig(record: Uint8Array): AvcDecoderConfig {
  const need = (off: number, n: number) => {
    if (off + n > record.length) throw malformed('avcC', `needs ${n} byte(s) at byte ${off} but the record is ${record.length} bytes`);
  };
  need(0, 6);
  if (record[0] !== 1) throw malformed('avcC', `configurationVersion at byte 0 is ${record[0]}, expected 1`);
  const lengthSize = (record[4]! & 0x03) + 1;
  if (lengthSize === 3) throw malformed('avcC', 'lengthSizeMinusOne at byte 4 is 2 (3-byte lengths are not allowed)');
  const readSets = (countOff: number, count: number, into: Uint8Array[]): number => {
    let off = countOff;
    for (let i = 0; i < count; i++) {
      need(off, 2);
      const len = (record[off]! << 8) | record[off + 1]!;
      need(off + 2, len);
      into.push(record.subarray(off + 2, off + 2 + len));
      off += 2 + len;
    }
    return off;
  };
  const sps: Uint8Array[] = [];
  const pps: Uint8Array[] = [];
  const off = readSets(6, record[5]! & 0x1f, sps);
  need(off, 1);
  readSets(off + 1, record[off]!, pps);
  return { lengthSize, sps, pps };
}

/** The fields of a sequence parameter set that the MP4 sample entry and the MSE codec string need. */
export interface SpsInfo {
  /** profile_idc (66 baseline, 77 main, 100 high, …). */
  profileIdc: number;
  /** The constraint_set flags byte (the "compatibility" byte of the codec string). */
  constraintFlags: number;
  /** level_idc ×10 (e.g. 31 for level 3.1). */
  levelIdc: number;
  /** chroma_format_idc: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4 (1 unless a High profile says otherwise). */
  chromaFormatIdc: number;
  bitDepthLuma: number;
  bitDepthChroma: number;
  /** Displayed picture size in pixels after the SPS cropping window. */
  width: number;
  height: number;
}

/** Profiles whose SPS carries chroma format and bit depth (H.264 §7.3.2.1.1). */
const HIGH_PROFILES = new Set([100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]);

/** Exp-Golomb bit reader over an RBSP (emulation prevention bytes already removed). */
class BitReader {
  private bit = 0;
  constructor(private readonly bytes: Uint8Array) {}

  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) {
      const byte = this.bit >> 3;
      if (byte >= this.bytes.length) throw malformed('sps', `ends at byte ${this.bytes.length} of its payload while a field is still being read`);
      v = v * 2 + ((this.bytes[byte]! >> (7 - (this.bit & 7))) & 1);
      this.bit++;
    }
    return v;
  }

  ue(): number {
    let zeros = 0;
    while (this.u(1) === 0) {
      if (++zeros > 31) throw malformed('sps', `Exp-Golomb code at bit ${this.bit} is longer than 32 bits`);
    }
    return 2 ** zeros - 1 + this.u(zeros);
  }

  se(): number {
    const k = this.ue();
    return k % 2 === 1 ? (k + 1) / 2 : -k / 2;
  }
}

/** Removes the emulation prevention bytes (`00 00 03` → `00 00`) of a NAL unit payload. */
function toRbsp(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(payload.length);
  let n = 0;
  let zeros = 0;
  for (const b of payload) {
    if (zeros >= 2 && b === 3) {
      zeros = 0;
      continue;
    }
    zeros = b === 0 ? zeros + 1 : 0;
    out[n++] = b;
  }
  return out.subarray(0, n);
}

/**
 * Parses a sequence parameter set NAL unit (header byte included) up to its cropping window.
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST when the unit is shorter than 4 bytes, is not an SPS (type 7), or
 *   ends before the cropping window.
 */
export function parseSps(sps: Uint8Array): SpsInfo {
  if (sps.length < 4) throw malformed('sps', `${sps.length} bytes; an SPS has at least 4 (header, profile, constraints, level)`);
  if (nalType(sps) !== NAL_TYPE.SPS) throw malformed('sps', `byte 0 is NAL type ${nalType(sps)}, expected ${NAL_TYPE.SPS} (SPS)`);
  const r = new BitReader(toRbsp(sps.subarray(1)));
  const profileIdc = r.u(8);
  const constraintFlags = r.u(8);
  const levelIdc = r.u(8);
  r.ue(); // seq_parameter_set_id
  let chromaFormatIdc = 1;
  let bitDepthLuma = 8;
  let bitDepthChroma = 8;
  let separateColourPlane = 0;
  if (HIGH_PROFILES.has(profileIdc)) {
    chromaFormatIdc = r.ue();
    if (chromaFormatIdc === 3) separateColourPlane = r.u(1);
    bitDepthLuma = r.ue() + 8;
    bitDepthChroma = r.ue() + 8;
    r.u(1); // qpprime_y_zero_transform_bypass_flag
    if (r.u(1) === 1) {
      for (let i = 0; i < (chromaFormatIdc === 3 ? 12 : 8); i++) {
        if (r.u(1) === 0) continue;
        // scaling_list(): delta_scale values until nextScale becomes 0.
        let last = 8;
        let next = 8;
        for (let j = 0; j < (i < 6 ? 16 : 64) && next !== 0; j++) {
          next = (last + r.se() + 256) % 256;
          if (next !== 0) last = next;
        }
      }
    }
  }
  r.ue(); // log2_max_frame_num_minus4
  const pocType = r.ue();
  if (pocType === 0) r.ue();
  else if (pocType === 1) {
    r.u(1);
    r.se();
    r.se();
    const n = r.ue();
    for (let i = 0; i < n; i++) r.se();
  }
  r.ue(); // max_num_ref_frames
  r.u(1); // gaps_in_frame_num_value_allowed_flag
  const widthMbs = r.ue() + 1;
  const heightMapUnits = r.ue() + 1;
  const frameMbsOnly = r.u(1);
  if (frameMbsOnly === 0) r.u(1);
  r.u(1); // direct_8x8_inference_flag
  let crop = [0, 0, 0, 0];
  if (r.u(1) === 1) crop = [r.ue(), r.ue(), r.ue(), r.ue()];
  const chroma = separateColourPlane === 1 ? 0 : chromaFormatIdc;
  const cropUnitX = chroma === 0 ? 1 : chroma === 3 ? 1 : 2;
  const cropUnitY = (chroma === 1 ? 2 : 1) * (2 - frameMbsOnly);
  return {
    profileIdc,
    constraintFlags,
    levelIdc,
    chromaFormatIdc,
    bitDepthLuma,
    bitDepthChroma,
    width: widthMbs * 16 - cropUnitX * (crop[0]! + crop[1]!),
    height: (2 - frameMbsOnly) * heightMapUnits * 16 - cropUnitY * (crop[2]! + crop[3]!),
  };
}

/**
 * The RFC 6381 codec string of an H.264 stream for Media Source Extensions: `avc1.PPCCLL`, the profile,
 * constraint flags and level bytes of the SPS in upper-case hex (e.g. `avc1.42C01E`).
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST when the SPS is shorter than 4 bytes or not an SPS.
 */
export function avcCodecString(sps: Uint8Array): string {
  if (sps.length < 4) throw malformed('sps', `${sps.length} bytes; the codec string needs bytes 1–3`);
  if (nalType(sps) !== NAL_TYPE.SPS) throw malformed('sps', `byte 0 is NAL type ${nalType(sps)}, expected ${NAL_TYPE.SPS} (SPS)`);
  const hex = (b: number) => b.toString(16).toUpperCase().padStart(2, '0');
  return `avc1.${hex(sps[1]!)}${hex(sps[2]!)}${hex(sps[3]!)}`;
}
