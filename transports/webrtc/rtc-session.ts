import { MediaStreamTrack, RTCPeerConnection, type RTCDataChannel } from 'werift';
import type { Subscription } from 'rxjs';
import type { WorldSessionHandle } from '../../src/engine/session';
import { OmniError } from '../../src/errors';
import type { OmniEvent } from '../../src/request/omni-event';
import type { SessionRequestInput } from '../../src/request/session-request';
import { CreditPacer } from './credit-pacer';
import {
  ChannelMessageSchema,
  errorMessage,
  parseClientMessage,
  rateLimitedMessage,
  type ChannelMessage,
  type ErrorMessage,
  type FrameMessage,
  type ServerMessage,
} from './messages';
import { rtcPeerConfig, type RtcIceOptions } from './peer-config';
import { CHANNEL_LIMITS, PeerRateLimiter, type Clock, type PeerLimits, type Verdict } from './rate-limit';
import { answerProblem, sdpSections } from './sdp-check';
import { VIDEO_CLOCK_RATE, VideoSender } from './video-sender';

/** Tuning of a WebRTC world session (docs/webrtc.md, "Pacing"). */
export interface RtcSessionOptions {
  /** Frames granted to the rollout but not yet sent, at most. Default 2 (raised to the chunk size when larger). */
  windowFrames?: number;
  /** Grant credits no faster than the session's fps (the rollout never runs ahead of real time). Default true. */
  paceToFps?: boolean;
  /** Flush the chunk being denoised when an action changes key or vector (fresher frames on a turn). Default true. */
  flushOnChange?: boolean;
  /** Frames from one keyframe to the next. Default `fps / 2` rounded (a lost packet heals within half a second). */
  keyframeInterval?: number;
  /** ICE servers, host addresses, bind address, port range and transport policy of the peer (peer-config.ts). */
  ice?: RtcIceOptions;
  /** Rate limits of the data channel's messages (docs/webrtc.md, "Rate limits"). Default {@link CHANNEL_LIMITS}. */
  channelLimits?: PeerLimits<ChannelMessage['type']>;
  /** Clock of the rate limits (ms). Default `performance.now()`. */
  clock?: Clock;
  ffmpegPath?: string;
}

/** Candidates held before the answer, at most (more are refused: a client trickles a handful per interface). */
const MAX_PENDING_CANDIDATES = 64;

/** What a WebRTC session uses of a world session (`Engine.session` on any topology, or any frame source with its surface). */
export type RtcWorld = WorldSessionHandle;

/** What a WebRTC session needs of the engine. */
export interface SessionOpener {
  session(input: SessionRequestInput): Promise<RtcWorld>;
}

/** Why a session ended, as given to `onEnded`. */
export type EndReason =
  'client_closed' | 'signaling_closed' | 'channel_closed' | 'peer_failed' | 'peer_closed' | 'session_ended' | 'error' | 'server_closing' | 'rate_limited';

/** A client's trickled ICE candidate (`RTCIceCandidateInit`), its shape already checked (messages.ts). */
export interface CandidateInit {
  candidate: string;
  sdpMid?: string | null;
  sdpMLineIndex?: number | null;
}

interface FrameMeta {
  chunk: number;
  pts: number;
  key: string;
  actionId?: string;
}

/**
 * One WebRTC world session (docs/webrtc.md): a werift `RTCPeerConnection` with a send-only H.264 video track
 * carrying the session's frames and a data channel (`omnirx`) for actions in and frame metadata, stats and errors
 * out. Credits pace the rollout ({@link CreditPacer}) from the moment the data channel opens. The world session is
 * closed (and so freed) when the peer leaves: data channel closed, connection failed or closed, or `close()` (the
 * signaling socket closed).
 */
export class RtcSession {
  readonly pc: RTCPeerConnection;
  private readonly channel: RTCDataChannel;
  private readonly track = new MediaStreamTrack({ kind: 'video' });
  private readonly sender: VideoSender<FrameMeta>;
  /** Created when the data channel opens (pacing starts then). */
  private pacer?: CreditPacer;
  private readonly events?: Subscription;
  private chunkFrames = 1;
  private readonly openedAt = performance.now();
  private lastAction?: { key: string; vector?: [number, number] };
  private flushes = 0;
  private ended = false;
  /** `applying` while werift takes the answer, `applied` once it took it (candidates then go straight to werift). */
  private answer: 'none' | 'applying' | 'applied' = 'none';
  /** Candidates received before the answer was applied, applied right after it (each settles its own promise). */
  private pending: Array<{ candidate: CandidateInit; resolve: () => void; reject: (err: unknown) => void }> = [];
  private readonly endedPromise: Promise<EndReason>;
  private resolveEnded!: (r: EndReason) => void;
  /** Bounds the work the peer's data-channel messages cause (rate-limit.ts). */
  private readonly limiter: PeerRateLimiter<ChannelMessage['type']>;

  private constructor(
    readonly world: RtcWorld,
    private readonly options: RtcSessionOptions,
  ) {
    this.endedPromise = new Promise((resolve) => (this.resolveEnded = resolve));
    this.limiter = new PeerRateLimiter(options.channelLimits ?? CHANNEL_LIMITS, options.clock);
    this.pc = new RTCPeerConnection(rtcPeerConfig(options.ice));
    this.pc.addTransceiver(this.track, { direction: 'sendonly' });
    this.channel = this.pc.createDataChannel('omnirx', { ordered: true });
    const p = world.params;
    this.sender = new VideoSender<FrameMeta>({
      track: this.track,
      width: p.width,
      height: p.height,
      fps: p.fps,
      keyframeInterval: options.keyframeInterval ?? Math.max(1, Math.round(p.fps / 2)),
      ffmpegPath: options.ffmpegPath,
      onFrame: (meta, rtp) => {
        this.send({
          type: 'frame',
          chunk: meta.chunk,
          pts: meta.pts,
          rtp,
          key: meta.key,
          ...(meta.actionId !== undefined ? { action_id: meta.actionId } : {}),
        } satisfies FrameMessage);
        this.pacer?.frameSent();
      },
      onError: (err) => this.fail(err),
    });
    this.channel.stateChanged.subscribe((state) => {
      if (state === 'open') this.onChannelOpen();
      if (state === 'closed') this.close('channel_closed');
    });
    this.channel.onMessage.subscribe((data) => this.onChannelMessage(data));
    this.pc.connectionStateChange.subscribe((state) => {
      if (state === 'failed') this.close('peer_failed');
      if (state === 'closed') this.close('peer_closed');
    });
    // Last, since a session that already ended completes at once. The admitted event arrives synchronously on
    // subscribe; chunks come only after credits, granted once the channel opens.
    this.events = world.events$.subscribe({
      next: (ev) => {
        if (ev.type === 'admitted' && typeof ev.params.chunkFrames === 'number') this.chunkFrames = ev.params.chunkFrames;
        else this.onEvent(ev);
      },
      complete: () => this.close('session_ended'),
    });
  }

  /**
   * Opens a world session on `engine` and its peer connection.
   * @throws OmniError from `engine.session` for input the engine refuses (the `param` names the field).
   */
  static async open(engine: SessionOpener, input: SessionRequestInput, options: RtcSessionOptions = {}): Promise<RtcSession> {
    const world = await engine.session(input);
    try {
      return new RtcSession(world, options);
    } catch (err) {
      world.close();
      throw err;
    }
  }

  get id(): string {
    return this.world.id;
  }

  /** Resolves with the reason once the session ended (the world session is closed; its memory frees after). */
  get whenEnded(): Promise<EndReason> {
    return this.endedPromise;
  }

  /** The server's SDP offer, all ICE candidates included. */
  async createOffer(): Promise<string> {
    const offer = await this.pc.createOffer();
    await this.pc.setLocalDescription(offer);
    return this.pc.localDescription!.sdp;
  }

  /**
   * Applies the client's SDP answer, checked against the offer first (sdp-check.ts), then the candidates that
   * arrived before it. A refused answer changes nothing: the session waits for another one.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (param `sdp`) before the offer, after an answer was taken, for an
   *   answer that does not match the offer (media sections, mids, ICE credentials, fingerprint), or one werift refuses.
   */
  async acceptAnswer(sdp: string): Promise<void> {
    const refuse = (why: string, cause?: unknown) =>
      new OmniError('OMNIRX_ERR_INVALID_REQUEST', `sdp: ${why}`, { param: 'sdp', ...(cause !== undefined ? { cause } : {}) });
    if (this.answer !== 'none') throw refuse('this session already has an answer (one per session)');
    const offer = this.pc.localDescription?.sdp;
    if (offer === undefined) throw refuse('no offer was sent yet (answer the "offer" message)');
    const problem = answerProblem(sdp, offer);
    if (problem !== undefined) throw refuse(`the answer was refused: ${problem}`);
    this.answer = 'applying';
    try {
      await this.pc.setRemoteDescription({ type: 'answer', sdp });
    } catch (err) {
      this.answer = 'none';
      throw refuse(`the answer was refused: ${(err as Error).message}`, err);
    }
    this.answer = 'applied';
    for (const p of this.pending.splice(0)) await this.applyCandidate(p.candidate).then(p.resolve, p.reject);
  }

  /**
   * Adds a trickled ICE candidate of the client. Its media section is checked against the offer at once; before the
   * answer it is held and the promise settles once it was applied right after the answer (the answer is never
   * blamed for it). After the session ended it is dropped.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST, param `candidate.sdpMid` / `candidate.sdpMLineIndex` when it
   *   names no media section of the offer, param `candidate` when werift refuses it (now or once the answer came).
   */
  async addCandidate(candidate: CandidateInit): Promise<void> {
    if (this.ended) return;
    const offer = this.pc.localDescription?.sdp;
    if (offer !== undefined)
      checkCandidateSection(
        candidate,
        sdpSections(offer).map((s) => s.mid),
      );
    if (this.answer !== 'applied') {
      if (this.pending.length >= MAX_PENDING_CANDIDATES)
        throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `candidate: at most ${MAX_PENDING_CANDIDATES} candidates are held before the answer`, {
          param: 'candidate',
        });
      return new Promise((resolve, reject) => this.pending.push({ candidate, resolve, reject }));
    }
    return this.applyCandidate(candidate);
  }

  private async applyCandidate(candidate: CandidateInit): Promise<void> {
    if (this.ended) return;
    try {
      await this.pc.addIceCandidate({
        candidate: candidate.candidate,
        sdpMid: candidate.sdpMid ?? undefined,
        sdpMLineIndex: candidate.sdpMLineIndex ?? undefined,
      });
    } catch (err) {
      throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `candidate: refused: ${(err as Error).message}`, { param: 'candidate', cause: err });
    }
  }

  /** Ends the session: closes the world session, the encoder and the peer connection. Idempotent. */
  close(reason: EndReason): void {
    if (this.ended) return;
    this.ended = true;
    this.pacer?.stop();
    this.send({ type: 'closed', reason });
    this.events?.unsubscribe();
    this.world.close();
    this.sender.close();
    this.track.stop();
    // The peer connection closes after the `closed` message had its chance to leave.
    void this.pc.close().catch(() => undefined);
    for (const p of this.pending.splice(0)) p.resolve();
    this.resolveEnded(reason);
  }

  private onEvent(ev: OmniEvent): void {
    if (ev.type === 'chunk' && ev.rollout !== undefined && ev.artifact.kind === 'video') {
      const { frames, width, height, numFrames } = ev.artifact;
      const bytes = width * height * 3;
      for (let i = 0; i < numFrames; i++) {
        const a = ev.rollout.action;
        this.sender.push(frames.subarray(i * bytes, (i + 1) * bytes), {
          chunk: ev.rollout.chunk,
          pts: ev.rollout.firstFrame + i,
          key: a.key,
          ...(a.id !== undefined ? { actionId: a.id } : {}),
        });
      }
      return;
    }
    if (ev.type === 'error') {
      this.send(errorMessage(ev.code, ev.message, ev.param ?? null, { fatal: true }));
      this.close('error');
    }
  }

  private onChannelOpen(): void {
    const p = this.world.params;
    // Nothing latency-critical rides on the first server → client messages (docs/webrtc.md, werift SCTP note).
    if (this.ended || this.pacer !== undefined) return;
    this.send({
      type: 'ready',
      session_id: this.id,
      width: p.width,
      height: p.height,
      fps: p.fps,
      chunk_frames: this.chunkFrames,
      rtp_clock_rate: VIDEO_CLOCK_RATE,
    });
    this.pacer = new CreditPacer({
      windowFrames: Math.max(this.options.windowFrames ?? 2, this.chunkFrames),
      minIntervalMs: this.options.paceToFps === false ? 0 : 1000 / p.fps,
      grant: (n) => this.world.credits.next(n),
    });
    this.pacer.start();
  }

  /** Parses and handles one data-channel message within the peer's rate limits (bytes first, then its type). */
  private onChannelMessage(data: string | Buffer): void {
    if (this.ended) return;
    if (!this.admit(this.limiter.checkBytes(typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength))) return;
    const r = parseClientMessage(ChannelMessageSchema, data, typeof data !== 'string');
    if (!r.ok) {
      if (this.admit(this.limiter.check('invalid'))) this.send(r.error);
      return;
    }
    if (this.admit(this.limiter.check(r.value.type))) this.handle(r.value);
  }

  /**
   * True when the limiter let the message through. A dropped one sends a `rate_limited` error when the limiter asks
   * (at most one per second) and ends the session (`rate_limited`) when the peer kept flooding.
   */
  private admit(v: Verdict): boolean {
    if (v.ok) return true;
    if (v.report !== undefined) this.send(rateLimitedMessage(v.limit, v.report.dropped, v.report.rate));
    if (v.close) {
      this.send(errorMessage('rate_limited', `the peer kept sending far over its rate limits ("${v.limit}"): the session is closed`, null, { fatal: true }));
      this.close('rate_limited');
    }
    return false;
  }

  private handle(m: ChannelMessage): void {
    switch (m.type) {
      case 'action':
        return this.act(m);
      case 'flush':
        this.flushes++;
        return this.world.flush();
      case 'close':
        return this.close('client_closed');
      case 'stats': {
        const s = this.world.stats();
        return this.send({
          type: 'stats',
          session_id: this.id,
          frames_sent: this.sender.framesSent,
          chunks: s.chunks,
          frames_in_flight: this.pacer?.framesInFlight ?? 0,
          credit_balance: s.creditBalance,
          encode_ms_p50: this.sender.encodeMsP50(),
          flushes: this.flushes,
          uptime_ms: Math.round(performance.now() - this.openedAt),
        });
      }
    }
  }

  /** Feeds an action; a refused one gets an error naming the field (`key`, `vector`, `id`) and changes nothing. */
  private act(m: Extract<ChannelMessage, { type: 'action' }>): void {
    const action = { key: m.key, ...(m.vector !== undefined ? { vector: m.vector } : {}), ...(m.id !== undefined ? { id: m.id } : {}) };
    try {
      this.world.actions.next(action);
    } catch (err) {
      return this.send(
        toErrorMessage(err, {
          param: (p) => p.replace(/^action\./, ''),
          replyTo: typeof m.id === 'string' && m.id.length >= 1 && m.id.length <= 64 ? m.id : null,
        }),
      );
    }
    const a = action as { key: string; vector?: [number, number] };
    const changed = this.lastAction !== undefined && (this.lastAction.key !== a.key || String(this.lastAction.vector) !== String(a.vector));
    this.lastAction = { key: a.key, ...(a.vector !== undefined ? { vector: a.vector } : {}) };
    if (changed && this.options.flushOnChange !== false) {
      this.flushes++;
      this.world.flush();
    }
    // A chunk waiting for its frame slot starts now, with this action, instead of at the next slot.
    this.pacer?.expedite();
  }

  private fail(err: unknown): void {
    this.send(toErrorMessage(err, { fatal: true }));
    this.close('error');
  }

  private send(m: ServerMessage): void {
    if (this.channel.readyState !== 'open') return;
    try {
      this.channel.send(JSON.stringify(m));
    } catch {
      // The channel closed under us: its state change ends the session.
    }
  }
}

/**
 * An error message from anything thrown: OmniErrors keep their code and param (mapped by `opts.param`), anything
 * else is `OMNIRX_ERR_INTERNAL` with param null. `fatal` (default false) and `replyTo` (default null) as given.
 */
export function toErrorMessage(err: unknown, opts: { param?: (p: string) => string; fatal?: boolean; replyTo?: string | null } = {}): ErrorMessage {
  const flags = { fatal: opts.fatal ?? false, replyTo: opts.replyTo ?? null };
  if (err instanceof OmniError) return errorMessage(err.code, err.message, err.param === undefined ? null : (opts.param ?? ((p) => p))(err.param), flags);
  return errorMessage('OMNIRX_ERR_INTERNAL', err instanceof Error ? err.message : String(err), null, flags);
}

/**
 * Checks that a candidate names a media section of the offer whose mids are `mids` (in order): by `sdpMid` when
 * given, else by `sdpMLineIndex`; an end-of-candidates naming neither applies to all.
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST, param `candidate.sdpMid` or `candidate.sdpMLineIndex`.
 */
function checkCandidateSection(c: CandidateInit, mids: Array<string | undefined>): void {
  const known = mids.map((m) => `"${m ?? ''}"`).join(', ');
  if (typeof c.sdpMid === 'string') {
    if (!mids.includes(c.sdpMid))
      throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `candidate.sdpMid: "${c.sdpMid}" is no media section of the offer (its mids: ${known})`, {
        param: 'candidate.sdpMid',
      });
  } else if (typeof c.sdpMLineIndex === 'number' && c.sdpMLineIndex >= mids.length) {
    throw new OmniError(
      'OMNIRX_ERR_INVALID_REQUEST',
      `candidate.sdpMLineIndex: ${c.sdpMLineIndex} is no media section of the offer (it has ${mids.length}: 0-${mids.length - 1})`,
      { param: 'candidate.sdpMLineIndex' },
    );
  }
}
