import { randomUUID } from 'node:crypto';
import { Subject, type Subscription } from 'rxjs';
import { WebSocket, type RawData } from 'ws';
import type { WorldSessionHandle } from '../../src/engine/session';
import type { RgbFrame } from '../../src/media/h264-encoder';
import type { OmniEvent, RolloutInfo } from '../../src/request/omni-event';
import type { SessionRequestInput } from '../../src/request/session-request';
import type { ServedEngine } from '../shared/served-engine';
import { httpFieldOf, toVideoRequest } from '../shared/video-request';
import { parseClientMessage, type ClientMessage, type GenerateMessage, type SessionMessage, type StreamFormat } from './client-messages';
import { CreditQueue } from './credit-queue';
import { toErrorMessage, type ServerMessage } from './server-messages';
import { videoPackets, type VideoPacket } from './video-packets';

/** What a stream connection needs of its server. */
export interface StreamConnectionDeps {
  /** The engine. @throws (an error with `code`) while it is not up. */
  engine: () => ServedEngine;
  /** @throws (an error with `code`) while the server admits no new work (starting or draining). */
  admitting: () => void;
  /** The ffmpeg binary (resolved once per server). */
  ffmpegPath: () => Promise<string>;
  /** Most credits a client may hold unspent, frames. */
  maxCredits: number;
  /**
   * Most bytes the socket may hold unsent (`ws.bufferedAmount`) before another message is sent; beyond it the
   * client is too slow for the credits it granted and the connection is closed (1008) after an error message.
   */
  maxBufferedBytes: number;
}

/** A frame waiting for a credit: its pixels, size and what the `frame` message says about it. */
interface PendingFrame {
  rgb: RgbFrame;
  width: number;
  height: number;
  fps: number;
  pts: number;
  chunk: number | null;
  action: RolloutInfo['action'] | null;
}

type Phase = 'idle' | 'starting' | 'streaming' | 'ended';

/** Maps a world-session error's `param` (a session request path) to the field of the `session` message. */
function sessionFieldOf(param: string | undefined): string | null {
  if (param === undefined) return null;
  return param === 'width' || param === 'height' ? 'size' : param;
}

/**
 * One client of `/v1/stream` (protocol in docs/streaming.md): one generation or world session per connection,
 * streamed as fMP4 (or raw H.264) binary messages with JSON control messages beside them, paced by the client's
 * credits. Every refused client message gets an `error` message naming the field and the connection keeps
 * serving; a failure of the stream itself is sent as a fatal `error` and the socket is closed. Closing the socket
 * cancels the generation or closes the session, and kills the encoder.
 */
export class StreamConnection {
  private phase: Phase = 'idle';
  private format: StreamFormat = 'fmp4';
  private readonly queue: CreditQueue<PendingFrame>;
  /** `frame` messages of the frames handed to the encoder whose packets are not out yet, in order. */
  private readonly inEncoder: PendingFrame[] = [];
  private readonly frames$ = new Subject<RgbFrame>();
  private encoder?: Subscription;
  private stream?: Subscription;
  private session?: WorldSessionHandle;
  /** The latest action received while the session was being opened (applied once it is). */
  private earlyAction?: { key: string; vector?: [number, number]; id?: string };
  /** A `session` start message is being served (the session is opening). */
  private sessionPending = false;
  /** The ffmpeg binary, resolved before a stream starts. */
  private ffmpegPath?: string;
  /** The engine admitted the stream's work (errors from then on end the stream). */
  private admitted = false;
  private producerDone = false;
  private closedByClient = false;
  private sent = 0;
  /** Frames of the generation handed to the credit queue so far (decoded chunks first, the final video's rest after). */
  private queued = 0;
  /** The `id` of the start message being served (errors of the stream answer it), or null. */
  private startId: string | null = null;

  constructor(
    private readonly ws: WebSocket,
    private readonly deps: StreamConnectionDeps,
  ) {
    this.queue = new CreditQueue<PendingFrame>(deps.maxCredits, (f) => this.encode(f));
    ws.on('message', (data: RawData, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on('close', () => this.dispose());
    ws.on('error', () => this.dispose());
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.phase === 'ended') return;
    if (isBinary) {
      this.refuse('invalid_message', 'binary messages are not accepted on this socket; send JSON text messages', null, null);
      return;
    }
    const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
    const parsed = parseClientMessage(text);
    if (!parsed.ok) {
      this.refuse(parsed.problem.code, parsed.problem.message, parsed.problem.param, parsed.problem.replyTo);
      return;
    }
    this.handle(parsed.message);
  }

  private handle(m: ClientMessage): void {
    const replyTo = m.id ?? null;
    switch (m.type) {
      case 'generate':
      case 'session':
        if (this.phase !== 'idle') {
          this.refuse('already_started', 'this connection already has a stream (one per connection); open another connection for another one', 'type', replyTo);
          return;
        }
        this.phase = 'starting';
        this.startId = replyTo;
        this.format = m.format;
        void (m.type === 'generate' ? this.startGeneration(m) : this.startSession(m));
        return;
      case 'credit':
        if (this.phase === 'idle') return this.refuse('not_started', 'credits apply to a stream: send "generate" or "session" first', 'type', replyTo);
        try {
          this.queue.grant(m.frames);
        } catch (err) {
          return this.refuse('invalid_message', `credit: ${(err as Error).message}`, 'frames', replyTo);
        }
        this.session?.credits.next(m.frames);
        return;
      case 'action': {
        const action = { key: m.key, ...(m.vector === undefined ? {} : { vector: m.vector }), ...(m.id === undefined ? {} : { id: m.id }) };
        if (!this.isSession()) return this.refuse('not_started', 'actions apply to a world session: send "session" first', 'type', replyTo);
        if (this.session === undefined) {
          this.earlyAction = action;
          return;
        }
        this.act(action);
        return;
      }
      case 'flush':
        if (!this.isSession()) return this.refuse('not_started', 'flush applies to a world session: send "session" first', 'type', replyTo);
        this.session?.flush();
        return;
      case 'close':
        this.closeStream();
        return;
    }
  }

  private isSession(): boolean {
    return this.session !== undefined || this.sessionPending;
  }

  /** Feeds an action to the open session; one the model cannot take is answered with an error naming the field. */
  private act(action: { key: string; vector?: [number, number]; id?: string }): void {
    try {
      this.session!.actions.next(action);
    } catch (err) {
      this.sendJson(toErrorMessage(err, false, action.id ?? null, (p) => sessionFieldOf(p)?.replace(/^action\./, '') ?? null));
    }
  }

  /** Loads the model, maps the request as `POST /v1/videos` does and subscribes to the engine's events. */
  private async startGeneration(m: GenerateMessage): Promise<void> {
    let engine: ServedEngine;
    const body = m.request;
    let mapped: ReturnType<typeof toVideoRequest>;
    try {
      this.deps.admitting();
      engine = this.deps.engine();
      this.ffmpegPath = await this.deps.ffmpegPath();
      let model;
      try {
        model = await engine.models.get(body.model);
      } catch (err) {
        throw Object.assign(toErrorMessage(err, false, this.startId), { param: 'model' });
      }
      mapped = toVideoRequest(body, `stream_${randomUUID().replace(/-/g, '')}`, model.spec.id, model.spec.defaults.fps);
      if (m.decode_chunk_frames > 0) mapped.request.outputs = { ...mapped.request.outputs, decodeChunkFrames: m.decode_chunk_frames };
    } catch (err) {
      return this.startFailed(toErrorMessage(err, false, this.startId, (p) => `request.${p}`));
    }
    if (this.phase !== 'starting') return;
    this.phase = 'streaming';
    const fieldOf = (p: string | undefined) => {
      const f = httpFieldOf(p, mapped.framesFrom);
      return f === null ? null : `request.${f}`;
    };
    this.stream = engine.generate(mapped.request).subscribe({
      next: (ev) => this.onEvent(ev, fieldOf),
      error: (err: unknown) => this.fail(toErrorMessage(err, true, this.startId, fieldOf)),
    });
  }

  /** Opens the world session, subscribes to its events and hands it the credits and action received meanwhile. */
  private async startSession(m: SessionMessage): Promise<void> {
    this.sessionPending = true;
    let session: WorldSessionHandle;
    try {
      this.deps.admitting();
      const input: SessionRequestInput = { prompt: m.prompt };
      if (m.model !== undefined) input.model = m.model;
      if (m.size !== undefined) Object.assign(input, m.size);
      if (m.fps !== undefined) input.fps = m.fps;
      if (m.seed !== undefined) input.seed = m.seed;
      if (m.eta !== undefined) input.eta = m.eta;
      if (m.image !== undefined) input.image = { width: m.image.width, height: m.image.height, data: new Uint8Array(Buffer.from(m.image.data, 'base64')) };
      this.ffmpegPath = await this.deps.ffmpegPath();
      session = await this.deps.engine().session(input);
    } catch (err) {
      this.sessionPending = false;
      return this.startFailed(toErrorMessage(err, false, this.startId, sessionFieldOf));
    }
    this.sessionPending = false;
    if (this.phase !== 'starting') {
      session.close();
      return;
    }
    this.phase = 'streaming';
    this.session = session;
    this.stream = session.events$.subscribe({
      next: (ev) => this.onEvent(ev, sessionFieldOf),
      error: (err: unknown) => this.fail(toErrorMessage(err, true, this.startId, sessionFieldOf)),
    });
    if (this.queue.balance > 0) session.credits.next(this.queue.balance);
    if (this.earlyAction !== undefined) this.act(this.earlyAction);
    this.earlyAction = undefined;
  }

  /** The start message was refused before anything streamed: report it, and accept another start. */
  private startFailed(error: ServerMessage): void {
    if (this.phase !== 'starting') return;
    this.phase = 'idle';
    this.sendJson(error);
  }

  /** The engine rejected the generation before admitting it (validation, queue full): report it, accept another start. */
  private refusedByEngine(error: ServerMessage): void {
    this.stream?.unsubscribe();
    this.stream = undefined;
    this.phase = 'starting';
    this.startFailed(error);
  }

  private onEvent(ev: OmniEvent, fieldOf: (p: string | undefined) => string | null): void {
    switch (ev.type) {
      case 'queued':
        this.sendJson({ type: 'queued', position: ev.position });
        return;
      case 'admitted':
        this.admitted = true;
        this.sendJson({ type: 'admitted', id: ev.requestId, model: ev.model, params: ev.params });
        return;
      case 'step':
        this.sendJson({ type: 'progress', node: ev.node, step: ev.index + 1, total: ev.total, ms: ev.ms });
        return;
      case 'chunk': {
        // World sessions stream their chunks, a generation its decoded frames (in order, ahead of `final`); a
        // generation's previews are not part of its video.
        const a = ev.artifact;
        if (a.kind !== 'video') return;
        if (ev.rollout !== undefined) {
          this.pushFrames(a.frames, a.width, a.height, a.fps, a.numFrames, ev.rollout.firstFrame, ev.rollout.chunk, ev.rollout.action);
        } else if (ev.decoded !== undefined && this.session === undefined && ev.decoded.firstFrame === this.queued) {
          this.pushFrames(a.frames, a.width, a.height, a.fps, a.numFrames, this.queued, null, null);
          this.queued += a.numFrames;
        }
        return;
      }
      case 'final': {
        const video = ev.output.artifacts.video;
        if (this.session === undefined) {
          if (video === undefined || video.kind !== 'video')
            return this.fail({
              type: 'error',
              code: 'OMNIRX_ERR_INTERNAL',
              message: 'the generation finished without a video artifact',
              param: null,
              fatal: true,
              replyTo: this.startId,
            });
          // The frames not already sent as decoded chunks (all of them when none came).
          this.pushFrames(video.frames, video.width, video.height, video.fps, video.numFrames, 0, null, null, this.queued);
          this.queued = video.numFrames;
        }
        this.producerDone = true;
        this.finishIfDrained();
        return;
      }
      case 'error':
        if (this.admitted) this.fail(toErrorMessage(ev, true, this.startId, fieldOf));
        else this.refusedByEngine(toErrorMessage(ev, false, this.startId, fieldOf));
        return;
      default:
        return;
    }
  }

  private pushFrames(
    frames: Uint8Array,
    width: number,
    height: number,
    fps: number,
    count: number,
    firstPts: number,
    chunk: number | null,
    action: RolloutInfo['action'] | null,
    from = 0,
  ): void {
    const bytes = width * height * 3;
    for (let i = from; i < count; i++) {
      this.queue.push({ rgb: frames.subarray(i * bytes, (i + 1) * bytes), width, height, fps, pts: firstPts + i, chunk, action });
    }
  }

  /** Hands a credited frame to the encoder (started with the first frame, when the size is known). */
  private encode(f: PendingFrame): void {
    if (this.phase === 'ended') return;
    if (this.encoder === undefined) this.startEncoder(f);
    this.inEncoder.push(f);
    this.frames$.next(f.rgb);
    this.finishIfDrained();
  }

  private startEncoder(first: PendingFrame): void {
    const { width, height, fps } = first;
    this.encoder = this.frames$.pipe(videoPackets({ format: this.format, width, height, fps, ffmpegPath: this.ffmpegPath })).subscribe({
      next: (p) => this.sendPacket(p, width, height, fps),
      error: (err: unknown) => this.fail(toErrorMessage(err, true, this.startId)),
      complete: () => this.end(),
    });
  }

  /** Once the producer is done and every frame went to the encoder, ends the encoder's input. */
  private finishIfDrained(): void {
    if (!this.producerDone || this.queue.pending > 0 || this.phase === 'ended') return;
    if (this.encoder === undefined) this.end();
    else this.frames$.complete();
  }

  private sendPacket(p: VideoPacket, width: number, height: number, fps: number): void {
    if (p.kind === 'init') {
      this.sendJson({ type: 'init', format: this.format, codec: p.codec, width, height, fps });
      if (p.data !== undefined) this.sendBinary(p.data);
      return;
    }
    const f = this.inEncoder.shift();
    this.sendJson({
      type: 'frame',
      pts: p.pts,
      ptsMs: (p.pts * 1000) / fps,
      keyframe: p.keyframe,
      bytes: p.data.length,
      chunk: f?.chunk ?? null,
      action: f?.action ?? null,
    });
    this.sendBinary(p.data);
    this.sent++;
  }

  /** The client's `close`: stops the producer, sends the frames already encoding, then `end` (reason "closed"). */
  private closeStream(): void {
    if (this.phase === 'ended') return;
    this.closedByClient = true;
    if (this.phase === 'idle' || this.phase === 'starting') {
      this.phase = 'idle';
      this.end();
      return;
    }
    this.stream?.unsubscribe();
    this.session?.close();
    this.queue.clear();
    this.producerDone = true;
    this.finishIfDrained();
  }

  /** Sends `end` and closes the socket normally (1000). */
  private end(): void {
    if (this.phase === 'ended') return;
    this.sendJson({ type: 'end', frames: this.sent, reason: this.closedByClient ? 'closed' : 'completed' });
    this.dispose();
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000, 'end of stream');
  }

  /** Ends the stream after a failure: the fatal error, then close 1011. */
  private fail(error: ServerMessage): void {
    if (this.phase === 'ended') return;
    this.sendJson(error);
    this.dispose();
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1011, 'stream failed');
  }

  /** Answers a refused client message (its `id` is `replyTo`); the connection keeps serving. */
  private refuse(code: string, message: string, param: string | null, replyTo: string | null): void {
    this.sendJson({ type: 'error', code, message, param, fatal: false, replyTo });
  }

  /** Frees everything: cancels the generation or closes the session, kills the encoder. Idempotent. */
  private dispose(): void {
    if (this.phase === 'ended') return;
    this.phase = 'ended';
    this.queue.clear();
    this.stream?.unsubscribe();
    this.session?.close();
    this.encoder?.unsubscribe();
    this.frames$.complete();
  }

  private sendJson(m: ServerMessage): void {
    if (this.overBuffer()) return;
    this.ws.send(JSON.stringify(m));
  }

  private sendBinary(data: Uint8Array): void {
    if (this.overBuffer()) return;
    this.ws.send(data, { binary: true });
  }

  /** True when the socket cannot take more (closed, or over `maxBufferedBytes`, which also ends the stream). */
  private overBuffer(): boolean {
    if (this.ws.readyState !== WebSocket.OPEN) return true;
    if (this.ws.bufferedAmount <= this.deps.maxBufferedBytes) return false;
    const buffered = this.ws.bufferedAmount;
    this.dispose();
    this.ws.send(
      JSON.stringify({
        type: 'error',
        code: 'slow_consumer',
        message: `the client is not reading: ${buffered} bytes are waiting to be sent (the limit is ${this.deps.maxBufferedBytes}); grant fewer credits or read faster`,
        param: null,
        fatal: true,
        replyTo: null,
      } satisfies ServerMessage),
    );
    this.ws.close(1008, 'slow consumer');
    return true;
  }
}
