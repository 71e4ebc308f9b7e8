import type { FastifyInstance } from 'fastify';
import type { RawData } from 'ws';
import { OmniError } from '../../src/errors';
import type { SessionRequestInput } from '../../src/request/session-request';
import type { ServerContext } from '../shared/context';
import { HttpError } from '../shared/errors';
import type { WebrtcConfig } from '../../src/placement/webrtc-config';
import {
  errorMessage,
  MAX_SIGNALING_BYTES,
  parseClientMessage,
  rateLimitedMessage,
  SignalingMessageSchema,
  type ServerMessage,
  type SessionFields,
  type SignalingMessage,
} from './messages';
import { checkBindAddress, iceOptionsOf } from './peer-config';
import { PeerRateLimiter, SIGNALING_LIMITS, type PeerLimits, type Verdict } from './rate-limit';
import { RtcSession, toErrorMessage, type EndReason, type RtcSessionOptions } from './rtc-session';

/** Path of the signaling WebSocket. */
export const RTC_PATH = '/v1/rtc';

/** The engine's session input from a `start` message's `session` (the image decoded from base64). */
function sessionInput(f: SessionFields): SessionRequestInput {
  const { image, initialAction, ...rest } = f;
  return {
    ...(rest as Omit<SessionRequestInput, 'image' | 'initialAction'>),
    ...(initialAction !== undefined ? { initialAction: initialAction as SessionRequestInput['initialAction'] } : {}),
    ...(image !== undefined ? { image: { width: image.width, height: image.height, data: new Uint8Array(Buffer.from(image.data, 'base64')) } } : {}),
  };
}

/** Options of {@link webrtcTransport}. */
export interface WebrtcTransportOptions {
  /** The server's shared context (engine, lifecycle state, WebSocket router). */
  ctx: ServerContext;
  /** Options of every session it opens (pacing, keyframes, ICE, rate limits, ffmpeg); `webrtc` sets `ice` when given. */
  session?: RtcSessionOptions;
  /** The deploy config's `webrtc` section (validated): ICE servers, bind address, ports, policy (docs/webrtc.md). */
  webrtc?: WebrtcConfig;
  /** Rate limits of each signaling socket's messages. Default {@link SIGNALING_LIMITS}. */
  signalingLimits?: PeerLimits<SignalingMessage['type']>;
}

/**
 * The WebRTC transport, a Fastify plugin serving world sessions (docs/webrtc.md): signaling over the WebSocket
 * `/v1/rtc` on the server's WebSocket router (auth as every WebSocket route of the server). Server-offers
 * negotiation: the client sends `start` with the session's fields, the server opens the world session and answers
 * `offer` (complete SDP, loopback ICE), the client sends `answer`. One session per socket; closing the socket ends
 * it, and so does `close`, answered by `closed` before the socket closes. Bad messages get
 * `{"type":"error",code,message,param,fatal:false,replyTo}` and change nothing. Its `preClose` hook ends the open
 * sessions (`server_closing`) when the server closes. It registers no HTTP route. Each socket's messages and each
 * session's data-channel messages are rate-limited (rate-limit.ts).
 * @throws Error when `/v1/rtc` already has a WebSocket handler.
 * @throws OmniError OMNIRX_ERR_CONFIG (param `webrtc.bindAddress`) when the bind address is not one of this host's.
 */
export async function webrtcTransport(app: FastifyInstance, opts: WebrtcTransportOptions): Promise<void> {
  const { ctx } = opts;
  if (opts.webrtc?.bindAddress !== undefined) checkBindAddress(opts.webrtc.bindAddress);
  const options: RtcSessionOptions = { ...opts.session, ...(opts.webrtc !== undefined ? { ice: iceOptionsOf(opts.webrtc) } : {}) };
  const iceServers = options.ice?.iceServers ?? [];
  const icePolicy = options.ice?.iceTransportPolicy ?? 'all';
  const signalingLimits = opts.signalingLimits ?? SIGNALING_LIMITS;
  const live = new Set<RtcSession>();
  app.addHook('preClose', async () => {
    for (const s of [...live]) s.close('server_closing');
  });
  ctx.websockets.route(RTC_PATH, (ws) => {
    let session: RtcSession | undefined;
    let starting = false;
    let socketClosed = false;
    /** The client sent `close`: a session still opening is closed as soon as it exists. */
    let closeRequested = false;
    /** Why the session ends once `closeRequested`: the client's `close`, or a flood of messages. */
    let closeReason: EndReason = 'client_closed';
    const limiter = new PeerRateLimiter(signalingLimits, options.clock);
    const send = (m: ServerMessage) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
    };
    /** `closed` first, then the close frame (ws sends queued frames in order). */
    const closeSocket = (reason: EndReason) => {
      send({ type: 'closed', reason });
      if (reason === 'rate_limited') ws.close(1008, 'rate limited');
      else ws.close(1000, reason === 'client_closed' ? 'closed by the client' : 'session ended');
    };

    const start = async (fields: SessionFields, replyTo: string | null) => {
      starting = true;
      let s: RtcSession;
      try {
        if (ctx.state.phase === 'draining') throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the server is shutting down and opens no new sessions');
        s = await RtcSession.open(ctx.engine(), sessionInput(fields), options);
      } catch (err) {
        starting = false;
        if (err instanceof HttpError) send(errorMessage(err.code, err.message, err.param, { replyTo }));
        else send(toErrorMessage(err, { param: (p) => `session.${p}`, replyTo }));
        if (closeRequested) closeSocket(closeReason);
        return;
      }
      session = s;
      live.add(s);
      void s.whenEnded.then((reason) => {
        live.delete(s);
        closeSocket(reason);
      });
      if (socketClosed) return s.close('signaling_closed');
      if (closeRequested) return s.close(closeReason);
      try {
        const sdp = await s.createOffer();
        send({ type: 'offer', sdp, session_id: s.id, ice_servers: iceServers, ice_transport_policy: icePolicy });
      } catch (err) {
        send(toErrorMessage(err, { fatal: true, replyTo }));
        s.close('error');
      }
    };

    /** True when the limiter let the message through; else reports (at most once a second) or closes a flooder. */
    const admit = (v: Verdict): boolean => {
      if (v.ok) return true;
      if (v.report !== undefined) send(rateLimitedMessage(v.limit, v.report.dropped, v.report.rate));
      if (v.close && !closeRequested) {
        closeRequested = true;
        closeReason = 'rate_limited';
        send(errorMessage('rate_limited', `the client kept sending far over its rate limits ("${v.limit}"): the session is closed`, null, { fatal: true }));
        if (session !== undefined) session.close('rate_limited');
        else if (!starting) closeSocket('rate_limited');
      }
      return false;
    };

    const onMessage = async (data: RawData, binary: boolean) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (!admit(limiter.checkBytes(bytes.byteLength))) return;
      const r = parseClientMessage(SignalingMessageSchema, binary ? bytes : bytes.toString('utf8'), binary, MAX_SIGNALING_BYTES);
      if (!r.ok) return admit(limiter.check('invalid')) ? send(r.error) : undefined;
      const m = r.value;
      if (!admit(limiter.check(m.type))) return;
      const replyTo = m.id ?? null;
      if (closeRequested) return;
      if (m.type === 'start') {
        if (session !== undefined || starting)
          return send(errorMessage('invalid_message', 'type: this socket already has a session (one per socket)', 'type', { replyTo }));
        return start(m.session, replyTo);
      }
      if (m.type === 'close') {
        closeRequested = true;
        // The session's end sends `closed` and closes the socket (whenEnded); one still opening ends once it exists.
        if (session !== undefined) session.close('client_closed');
        else if (!starting) closeSocket('client_closed');
        return;
      }
      if (session === undefined)
        return send(errorMessage('invalid_message', `type: "${m.type}" before the session's offer (send "start" first)`, 'type', { replyTo }));
      try {
        if (m.type === 'answer') await session.acceptAnswer(m.sdp);
        else await session.addCandidate(m.candidate);
      } catch (err) {
        send(toErrorMessage(err, { replyTo }));
      }
    };

    ws.on('message', (data, binary) => void onMessage(data, binary));
    ws.on('error', () => undefined);
    ws.on('close', () => {
      socketClosed = true;
      session?.close('signaling_closed');
    });
  });
}
