import type { Observable } from 'rxjs';
import { muxFmp4, type Fmp4Chunk } from './mux-fmp4';
import { encodeH264, type H264EncoderOptions, type RgbFrame } from './h264-encoder';

/** Options of {@link fmp4Stream}: the encoder's, plus the track timescale. */
export interface Fmp4StreamOptions extends H264EncoderOptions {
  /** Ticks per second of the fMP4 track timeline. Default 90000. */
  timescale?: number;
}

/**
 * Live fMP4 of RGB24 frames: H.264 through one ffmpeg process ({@link encodeH264}), then `{ kind: 'init' }` once
 * and `{ kind: 'fragment' }` per frame ({@link muxFmp4}). Concatenated, the chunks form a playable MP4; sent as
 * they come, an MSE SourceBuffer plays them. Unsubscribing kills ffmpeg.
 */
export function fmp4Stream(frames$: Observable<RgbFrame>, options: Fmp4StreamOptions): Observable<Fmp4Chunk> {
  return frames$.pipe(encodeH264(options), muxFmp4(options));
}
