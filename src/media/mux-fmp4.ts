import { defer, type Observable, type OperatorFunction } from 'rxjs';
import { concatMap } from 'rxjs/operators';
import { OmniError } from '../errors';
import { initSegment, mediaSegment } from './fmp4';
import type { EncodedFrame } from './h264-encoder';
import { avcCodecString } from './nal';

/** What {@link muxFmp4} emits: the init segment once, then one fragment per encoded frame. */
export type Fmp4Chunk =
  | {
      kind: 'init';
      /** ftyp + moov, bytes. */
      data: Uint8Array;
      /** RFC 6381 codec string for MSE, e.g. `avc1.42C00A` (`video/mp4; codecs="…"`). */
      codec: string;
    }
  | {
      kind: 'fragment';
      /** moof + mdat of one frame, bytes. */
      data: Uint8Array;
      /** The frame's presentation index (EncodedFrame.pts). */
      pts: number;
      keyframe: boolean;
    };

/** Options of {@link muxFmp4}. */
export interface MuxFmp4Options {
  /** Picture width, pixels (must match the stream's SPS). */
  width: number;
  /** Picture height, pixels (must match the stream's SPS). */
  height: number;
  /** Frames per second; frame `pts` starts at `round(pts × timescale / fps)` ticks. */
  fps: number;
  /** Ticks per second of the track timeline. Default 90000. */
  timescale?: number;
}

/**
 * Packs H.264 access units into fragmented MP4: the init segment (built from the first frame, which must be a
 * keyframe carrying `sps` and `pps`) and then one moof+mdat fragment per frame, emitted synchronously with the
 * frame that made it (no frame is held back). Sequence numbers count from 1; decode times are
 * `round(pts × timescale / fps)` ticks and each duration runs to the next frame's time, so times never drift.
 *
 *     frames: -k----d-d-|   (k keyframe, d delta frame)
 *     result: -(if)-f-f-|   (i init and f fragment in the same frame as k)
 *
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (stream error) when the first frame is not a keyframe with
 *   parameter sets, or the segment writers reject a frame (see `initSegment`, `mediaSegment`).
 */
export function muxFmp4(options: MuxFmp4Options): OperatorFunction<EncodedFrame, Fmp4Chunk> {
  const timescale = options.timescale ?? 90000;
  const { fps } = options;
  if (typeof fps !== 'number' || !Number.isFinite(fps) || fps <= 0)
    throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `muxFmp4: fps must be a positive number; got ${String(fps)}`, { param: 'fps' });
  const ticks = (pts: number) => Math.round((pts * timescale) / fps);
  return (source: Observable<EncodedFrame>) =>
    defer(() => {
      let sequenceNumber = 0;
      return source.pipe(
        concatMap((frame): Fmp4Chunk[] => {
          const out: Fmp4Chunk[] = [];
          if (sequenceNumber === 0) {
            if (!frame.keyframe || frame.sps === undefined || frame.pps === undefined) {
              throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `muxFmp4: the first frame (pts ${frame.pts}) must be a keyframe with sps and pps`, {
                param: 'frame',
              });
            }
            const init = initSegment({ width: options.width, height: options.height, timescale, sps: frame.sps, pps: frame.pps });
            out.push({ kind: 'init', data: init, codec: avcCodecString(frame.sps) });
          }
          sequenceNumber++;
          const start = ticks(frame.pts);
          const data = mediaSegment({
            sequenceNumber,
            baseMediaDecodeTime: start,
            duration: ticks(frame.pts + 1) - start,
            sample: frame.data,
            keyframe: frame.keyframe,
          });
          out.push({ kind: 'fragment', data, pts: frame.pts, keyframe: frame.keyframe });
          return out;
        }),
      );
    });
}
