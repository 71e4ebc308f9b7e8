import { concatMap, map, type OperatorFunction } from 'rxjs';
import { fmp4Stream } from '../../src/media/fmp4-stream';
import { encodeH264, type RgbFrame } from '../../src/media/h264-encoder';
import { avcCodecString, splitAvcc, toAnnexB } from '../../src/media/nal';
import type { StreamFormat } from './client-messages';

/** What goes out on the socket for a stream of frames, in order: one `init`, then one `frame` per input frame. */
export type VideoPacket =
  | {
      kind: 'init';
      /** RFC 6381 codec string, e.g. `avc1.42C00A`. */
      codec: string;
      /** fMP4: the init segment (ftyp + moov), bytes; raw H.264 has none (the parameter sets travel in keyframes). */
      data?: Uint8Array;
    }
  | {
      kind: 'frame';
      /** fMP4: one moof+mdat; raw H.264: one Annex-B access unit (SPS and PPS in front of every keyframe). */
      data: Uint8Array;
      /** 0-based index of the frame in the stream. */
      pts: number;
      keyframe: boolean;
    };

/** Options of {@link videoPackets}. */
export interface VideoPacketOptions {
  format: StreamFormat;
  /** Frame size, pixels (even). */
  width: number;
  height: number;
  /** Frames per second of the stream's timeline. */
  fps: number;
  /** ffmpeg binary (resolved by the caller once). */
  ffmpegPath?: string;
  /** Frames from one keyframe to the next. Default `2 × fps`. */
  keyframeInterval?: number;
}

/**
 * Encodes RGB24 frames (`height × width × 3` bytes each) into the packets of one stream: fMP4 through
 * `fmp4Stream` (init segment with the first frame, then one fragment per frame), or raw H.264 for WebCodecs
 * clients (`toAnnexB`, parameter sets before each keyframe). Each frame's packet is emitted as soon as ffmpeg
 * wrote its access unit (no frame held back). Unsubscribing kills ffmpeg.
 * @throws OmniError (as a stream error) from the encoder: OMNIRX_ERR_FFMPEG, or OMNIRX_ERR_INVALID_REQUEST for a
 *   frame of the wrong size.
 */
export function videoPackets(options: VideoPacketOptions): OperatorFunction<RgbFrame, VideoPacket> {
  const enc = {
    width: options.width,
    height: options.height,
    fps: options.fps,
    ...(options.ffmpegPath === undefined ? {} : { ffmpegPath: options.ffmpegPath }),
    ...(options.keyframeInterval === undefined ? {} : { keyframeInterval: options.keyframeInterval }),
  };
  if (options.format === 'fmp4') {
    return (frames$) =>
      fmp4Stream(frames$, enc).pipe(
        map((c): VideoPacket =>
          c.kind === 'init' ? { kind: 'init', codec: c.codec, data: c.data } : { kind: 'frame', data: c.data, pts: c.pts, keyframe: c.keyframe },
        ),
      );
  }
  return (frames$) =>
    frames$.pipe(
      encodeH264(enc),
      concatMap((f): VideoPacket[] => {
        const nals = splitAvcc(f.data);
        const frame: VideoPacket = {
          kind: 'frame',
          data: toAnnexB(f.keyframe && f.sps && f.pps ? [f.sps, f.pps, ...nals] : nals),
          pts: f.pts,
          keyframe: f.keyframe,
        };
        return f.pts === 0 && f.sps !== undefined ? [{ kind: 'init', codec: avcCodecString(f.sps) }, frame] : [frame];
      }),
    );
}
