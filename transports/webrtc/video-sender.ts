import { Subject, type Subscription } from 'rxjs';
import { H264Packetizer, type MediaStreamTrack } from 'werift';
import { encodeH264, type EncodedFrame } from '../../src/media/h264-encoder';

/** RTP clock rate of the video track (RFC 6184: H.264 uses 90 kHz), Hz. */
export const VIDEO_CLOCK_RATE = 90_000;

/** RTP payload size of the video packets, bytes (below a 1280-byte path MTU with SRTP overhead). */
const MAX_RTP_PAYLOAD_BYTES = 1100;

/** Options of {@link VideoSender}. */
export interface VideoSenderOptions<M> {
  track: MediaStreamTrack;
  width: number;
  height: number;
  /** Frames per second stamped on the encoder's input. */
  fps: number;
  /** Frames from one keyframe to the next (a viewer that lost a packet recovers at the next one). */
  keyframeInterval: number;
  ffmpegPath?: string;
  /**
   * Called for each frame just before its RTP packets are written, with the frame's metadata and its RTP
   * timestamp (send it to the viewer here so it arrives ahead of the picture).
   */
  onFrame: (meta: M, rtpTimestamp: number, encodeMs: number) => void;
  /** Called once if the encoder fails (the sender stops). */
  onError: (err: unknown) => void;
}

/**
 * The video track of a session: RGB24 frames in (`push`), one ffmpeg libx264 encoder (ultrafast, zerolatency, no
 * B-frames, fixed short GOP), access units packetized for RTP (RFC 6184 mode 1: single NAL, STAP-A for SPS+PPS on
 * keyframes, FU-A) and written to the werift track.
 *
 * RTP timestamps follow the wall clock at send time (90 kHz since the sender started, strictly increasing), not the
 * nominal frame rate: a model that produces frames at an uneven rate then never makes the viewer's jitter buffer
 * hold frames back.
 */
export class VideoSender<M> {
  private readonly frames = new Subject<Uint8Array>();
  private readonly pending: Array<{ meta: M; at: number }> = [];
  private readonly sub: Subscription;
  private packetizer?: H264Packetizer;
  private readonly t0 = performance.now();
  private lastRtp = -1;
  private sent = 0;
  private readonly encodeMs: number[] = [];

  constructor(private readonly options: VideoSenderOptions<M>) {
    this.sub = this.frames
      .pipe(
        encodeH264({
          width: options.width,
          height: options.height,
          fps: options.fps,
          keyframeInterval: options.keyframeInterval,
          ffmpegPath: options.ffmpegPath,
        }),
      )
      .subscribe({ next: (unit) => this.send(unit), error: (err: unknown) => options.onError(err) });
  }

  /** Frames written to the track so far. */
  get framesSent(): number {
    return this.sent;
  }

  /** Median encode time of the last 64 frames, ms; null before the first. */
  encodeMsP50(): number | null {
    if (this.encodeMs.length === 0) return null;
    const s = [...this.encodeMs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)]!;
  }

  /** Queues one RGB24 frame (`height × width × 3` bytes) with its metadata. */
  push(frame: Uint8Array, meta: M): void {
    this.pending.push({ meta, at: performance.now() });
    this.frames.next(frame);
  }

  /** Stops the encoder (kills ffmpeg). Idempotent. */
  close(): void {
    this.sub.unsubscribe();
    this.frames.complete();
  }

  private send(unit: EncodedFrame): void {
    const p = this.pending.shift()!;
    if (unit.keyframe && this.packetizer === undefined) {
      this.packetizer = new H264Packetizer({
        maxPayloadSize: MAX_RTP_PAYLOAD_BYTES,
        inputFormat: 'length-prefixed',
        naluLengthSize: 4,
        parameterSets: [Buffer.from(unit.sps!), Buffer.from(unit.pps!)],
      });
    }
    if (this.packetizer === undefined) return;
    const now = performance.now();
    const rtp = Math.max(this.lastRtp + 1, Math.round(((now - this.t0) * VIDEO_CLOCK_RATE) / 1000)) >>> 0;
    this.lastRtp = rtp;
    const encodeMs = now - p.at;
    this.encodeMs.push(encodeMs);
    if (this.encodeMs.length > 64) this.encodeMs.shift();
    this.options.onFrame(p.meta, rtp, encodeMs);
    for (const packet of this.packetizer.packetize(Buffer.from(unit.data.buffer, unit.data.byteOffset, unit.data.byteLength), rtp, {
      isKeyframe: unit.keyframe,
    }))
      this.options.track.writeRtp(packet);
    this.sent++;
  }
}
