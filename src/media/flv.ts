import { OmniError } from '../errors';

/**
 * An incremental reader of the FLV byte stream ffmpeg writes with `-f flv` (Adobe FLV spec v10.1, Annex E).
 *
 * Why FLV and not `-f h264`: an Annex-B stream has no lengths, so the last NAL unit of frame k only ends when the
 * start code of frame k+1 arrives — a parser would hold every frame back by one frame period. FLV wraps each
 * encoded frame (one access unit, AVCC length-prefixed NAL units) in a tag that starts with its size, so a frame
 * is complete as soon as its bytes are in. ffmpeg's FLV muxer writes each packet at once (no interleaving delay
 * with a single stream).
 */

/** One video tag of an AVC FLV stream. */
export interface FlvVideoTag {
  /** AVCPacketType: 0 sequence header (an AVCDecoderConfigurationRecord), 1 NAL units (one access unit), 2 end of sequence. */
  packetType: number;
  /** FrameType 1 (keyframe). */
  keyframe: boolean;
  /** Decode timestamp of the tag, milliseconds. */
  timestampMs: number;
  /** Composition time offset, milliseconds (0 without B-frames). */
  compositionTimeMs: number;
  /** The payload after the 5-byte AVC video tag header (a copy, safe to keep). */
  payload: Uint8Array;
}

/** FLV file header (9 bytes) plus PreviousTagSize0 (4 bytes). */
const HEADER_BYTES = 13;
/** Tag header: type (1), data size (3), timestamp (3 + 1 extended), stream id (3). */
const TAG_HEADER_BYTES = 11;
const TAG_TYPE_VIDEO = 9;
const CODEC_AVC = 7;

/**
 * Feeds FLV bytes in arbitrary chunks and returns each AVC video tag once its last data byte has arrived; audio
 * and script tags are skipped. Holds the partial tag between calls (state per instance; make one per stream).
 */
export class FlvVideoTagReader {
  private pending = new Uint8Array(0);
  /** Stream offset of `pending[0]`, bytes (for error messages). */
  private base = 0;
  /** Bytes at the start of the next data still to skip (a PreviousTagSize trailer that had not arrived yet). */
  private skip = 0;
  private headerSeen = false;

  /**
   * Appends `chunk` and returns the video tags it completes, in stream order.
   * @throws OmniError OMNIRX_ERR_FFMPEG when the stream is not FLV or a video tag is not AVC (names the byte offset).
   */
  push(chunk: Uint8Array): FlvVideoTag[] {
    const joined = new Uint8Array(this.pending.length + chunk.length);
    joined.set(this.pending);
    joined.set(chunk, this.pending.length);
    let off = this.skip;
    const tags: FlvVideoTag[] = [];
    if (!this.headerSeen) {
      if (joined.length < HEADER_BYTES) {
        this.pending = joined;
        return tags;
      }
      if (joined[0] !== 0x46 || joined[1] !== 0x4c || joined[2] !== 0x56) {
        throw new OmniError(
          'OMNIRX_ERR_FFMPEG',
          `ffmpeg's output is not FLV: bytes 0–2 are ${Array.from(joined.subarray(0, 3), (b) => b.toString(16).padStart(2, '0')).join(' ')}, expected 46 4c 56 ("FLV")`,
        );
      }
      off = (joined[5]! << 24) | (joined[6]! << 16) | (joined[7]! << 8) | joined[8]!;
      off += 4;
      this.headerSeen = true;
    }
    // A tag is returned once its header and data are in; its 4-byte PreviousTagSize trailer is skipped lazily.
    for (;;) {
      if (off + TAG_HEADER_BYTES > joined.length) break;
      const type = joined[off]! & 0x1f;
      const size = (joined[off + 1]! << 16) | (joined[off + 2]! << 8) | joined[off + 3]!;
      const dataStart = off + TAG_HEADER_BYTES;
      if (dataStart + size > joined.length) break;
      if (type === TAG_TYPE_VIDEO) {
        const codec = joined[dataStart]! & 0x0f;
        if (codec !== CODEC_AVC || size < 5) {
          throw new OmniError('OMNIRX_ERR_FFMPEG', `FLV video tag at byte ${this.base + off} is not AVC (codec id ${codec}, ${size} bytes)`);
        }
        const timestampMs = ((joined[off + 7]! << 24) | (joined[off + 4]! << 16) | (joined[off + 5]! << 8) | joined[off + 6]!) >>> 0;
        const cts = (joined[dataStart + 2]! << 16) | (joined[dataStart + 3]! << 8) | joined[dataStart + 4]!;
        tags.push({
          packetType: joined[dataStart + 1]!,
          keyframe: joined[dataStart]! >> 4 === 1,
          timestampMs,
          compositionTimeMs: cts & 0x800000 ? cts - 0x1000000 : cts,
          payload: joined.slice(dataStart + 5, dataStart + size),
        });
      }
      off = dataStart + size + 4;
    }
    const keep = Math.min(off, joined.length);
    this.pending = joined.slice(keep);
    this.base += keep;
    this.skip = off - keep;
    return tags;
  }
}
