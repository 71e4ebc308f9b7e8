import { z } from 'zod';
import { PromptSchema } from '../shared/video-request';
import { candidateProblem } from './ice-candidate';

/**
 * Messages of the WebRTC transport (docs/webrtc.md): the signaling WebSocket (`/v1/rtc`) and the session's data
 * channel. Client → server messages are parsed with zod ({@link parseClientMessage}); server → client messages are
 * the plain types below, sent as JSON text.
 */

/** Largest data-channel message the server parses, bytes (larger ones get `message_too_large`; actions are tiny). */
export const MAX_MESSAGE_BYTES = 16 * 1024;

/** Largest signaling message the server parses, bytes (a `start` may carry a base64 image). */
export const MAX_SIGNALING_BYTES = 1024 * 1024;

/** Image-to-world first frame in a `start` message: RGB24 `[height, width, 3]`, base64. */
const ImageSchema = z.strictObject({
  width: z.number().int(),
  height: z.number().int(),
  /** base64 of `width · height · 3` bytes of RGB24. */
  data: z
    .string()
    .max(MAX_SIGNALING_BYTES)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'expected base64'),
});

/** The world session a `start` message opens (the fields of `Engine.session`, validated there in full). */
const SessionFieldsSchema = z.strictObject({
  prompt: PromptSchema,
  model: z.string().optional(),
  seed: z.number().optional(),
  width: z.number().optional(),
  height: z.number().optional(),
  fps: z.number().optional(),
  flowShift: z.number().optional(),
  eta: z.number().optional(),
  image: ImageSchema.optional(),
  initialAction: z.unknown().optional(),
});
export type SessionFields = z.infer<typeof SessionFieldsSchema>;

/**
 * The client's own id of a signaling message (any may carry one, as on `/v1/stream`): an `error` answering that
 * message echoes it as `replyTo`.
 */
const MessageIdSchema = z.string().min(1).max(64);

/**
 * A trickled ICE candidate (`RTCIceCandidateInit`): `candidate` in RFC 8839 grammar, or `""` for end-of-candidates;
 * a candidate names its media section by `sdpMid` or `sdpMLineIndex` (as `addIceCandidate` requires).
 */
const CandidateSchema = z
  .strictObject({ candidate: z.string().max(1024), sdpMid: z.string().max(64).nullish(), sdpMLineIndex: z.number().int().min(0).max(64).nullish() })
  .superRefine((c, ctx) => {
    const problem = candidateProblem(c.candidate);
    if (problem !== undefined) return ctx.addIssue({ code: 'custom', path: ['candidate'], message: problem });
    if (c.candidate !== '' && (c.sdpMid === undefined || c.sdpMid === null) && (c.sdpMLineIndex === undefined || c.sdpMLineIndex === null)) {
      ctx.addIssue({ code: 'custom', path: ['sdpMid'], message: 'a candidate needs sdpMid or sdpMLineIndex (the media section it belongs to)' });
    }
  });

/** Client → server on the signaling WebSocket. */
export const SignalingMessageSchema = z.discriminatedUnion('type', [
  /** Opens a session; the server answers with `offer` (server-offers negotiation). */
  z.strictObject({ type: z.literal('start'), id: MessageIdSchema.optional(), session: SessionFieldsSchema }),
  /** The client's SDP answer to the server's offer. */
  z.strictObject({ type: z.literal('answer'), id: MessageIdSchema.optional(), sdp: z.string().min(1).max(MAX_MESSAGE_BYTES) }),
  /** A trickled ICE candidate of the client (optional: a complete answer SDP needs none). */
  z.strictObject({ type: z.literal('candidate'), id: MessageIdSchema.optional(), candidate: CandidateSchema }),
  /** Ends the session (same as closing the socket); the server answers `closed`, then closes the socket. */
  z.strictObject({ type: z.literal('close'), id: MessageIdSchema.optional() }),
]);
export type SignalingMessage = z.infer<typeof SignalingMessageSchema>;

/** Client → server on the data channel. */
export const ChannelMessageSchema = z.discriminatedUnion('type', [
  /** An action (key none/up/down/left/right, optional 2-vector, optional id echoed in `frame` messages). */
  z.strictObject({ type: z.literal('action'), key: z.unknown(), vector: z.unknown().optional(), id: z.unknown().optional() }),
  /** Drops the chunk being denoised and generates it again with the latest action. */
  z.strictObject({ type: z.literal('flush') }),
  /** Ends the session. */
  z.strictObject({ type: z.literal('close') }),
  /** Asks for a `stats` message. */
  z.strictObject({ type: z.literal('stats') }),
]);
export type ChannelMessage = z.infer<typeof ChannelMessageSchema>;

/**
 * An error sent to the client (either channel), shaped as on `/v1/stream`: a refused message (the session keeps
 * running) or, with `fatal`, the failure that ends the session (a `closed` message follows).
 */
export interface ErrorMessage {
  type: 'error';
  /** `invalid_json`, `invalid_message`, `message_too_large`, or an engine code (`OMNIRX_ERR_*`). */
  code: string;
  message: string;
  /** The offending field as a dotted path (`key`, `session.width`, `candidate.sdpMid`), or null. */
  param: string | null;
  /** True when the session ends because of it. */
  fatal: boolean;
  /** The `id` of the client message it answers, or null (that message had no well-formed id, or none is answered). */
  replyTo: string | null;
  /** With code `rate_limited` only: the limit that dropped messages, a message type, `invalid` or `bytes`. */
  limit?: string;
}

/** Server → client on the signaling socket: the SDP offer (all ICE candidates included) and the ICE configuration. */
export interface OfferMessage {
  type: 'offer';
  sdp: string;
  session_id: string;
  /** The ICE servers the client should use (`RTCConfiguration.iceServers`): the deployment's, TURN credentials included. */
  ice_servers: Array<{ urls: string | string[]; username?: string; credential?: string }>;
  /** The client's `RTCConfiguration.iceTransportPolicy`: `relay` when the deployment relays only. */
  ice_transport_policy: 'all' | 'relay';
}

/** Server → client, first on the data channel: the session's parameters. */
export interface ReadyMessage {
  type: 'ready';
  session_id: string;
  width: number;
  height: number;
  /** PTS rate of the frames, frames per second. */
  fps: number;
  /** Frames per rollout chunk. */
  chunk_frames: number;
  /** RTP clock rate of the video track, Hz (to turn `rtp` into ms). */
  rtp_clock_rate: number;
}

/** Server → client on the data channel, one per video frame, sent before the frame's RTP packets. */
export interface FrameMessage {
  type: 'frame';
  /** Rollout chunk the frame belongs to. */
  chunk: number;
  /** Frame index in the session (0-based, the PTS in frames). */
  pts: number;
  /** RTP timestamp of the frame on the video track (what `requestVideoFrameCallback` reports as `rtpTimestamp`). */
  rtp: number;
  /** Key of the action the frame was generated with. */
  key: string;
  /** Id of that action, when the client gave one. */
  action_id?: string;
}

/** Server → client on the data channel, in answer to `{"type":"stats"}`. */
export interface StatsMessage {
  type: 'stats';
  session_id: string;
  /** Frames written to the video track. */
  frames_sent: number;
  /** Chunks the rollout emitted. */
  chunks: number;
  /** Frames granted to the rollout but not yet sent (the pacing window in use). */
  frames_in_flight: number;
  /** Credits the session holds unspent. */
  credit_balance: number;
  /** Median of the encoder's frame-in → access-unit-out time, ms (null before the first frame). */
  encode_ms_p50: number | null;
  /** Flushes triggered (by direction changes and `flush` messages). */
  flushes: number;
  /** Since the session opened, ms. */
  uptime_ms: number;
}

/** Server → client (either channel): the session ended; the server closes the peer connection next. */
export interface ClosedMessage {
  type: 'closed';
  reason: string;
}

export type ServerMessage = ErrorMessage | OfferMessage | ReadyMessage | FrameMessage | StatsMessage | ClosedMessage;

/** The outcome of parsing one incoming message. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; error: ErrorMessage };

/** An error message naming `param`; not fatal and answering no message unless `opts` says so. */
export function errorMessage(
  code: string,
  message: string,
  param: string | null = null,
  opts: { fatal?: boolean; replyTo?: string | null } = {},
): ErrorMessage {
  return { type: 'error', code, message, param, fatal: opts.fatal ?? false, replyTo: opts.replyTo ?? null };
}

/**
 * The `rate_limited` error (not fatal) reporting `dropped` messages dropped by `limit` (a message type, `invalid` for
 * refused messages, `bytes`) since the last report; `param` is `type` for a type's limit, else `message`.
 */
export function rateLimitedMessage(limit: string, dropped: number, rate: { perSecond: number; burst: number }): ErrorMessage {
  const what = limit === 'bytes' ? 'bytes' : limit === 'invalid' ? 'refused messages' : `"${limit}" messages`;
  const text = `${what} are limited to ${rate.perSecond} per second (bursts of ${rate.burst}): ${dropped} message${dropped === 1 ? '' : 's'} dropped since the last report`;
  return { ...errorMessage('rate_limited', text, limit === 'bytes' || limit === 'invalid' ? 'message' : 'type'), limit };
}

/**
 * Parses one client message (text or binary) with `schema`: UTF-8 JSON of at most `maxBytes` bytes (default
 * {@link MAX_MESSAGE_BYTES}). Never throws; a bad message gives an {@link ErrorMessage} naming the field (`type` for
 * an unknown type, the dotted path of a wrong field, null for JSON that is not an object) with `replyTo` the
 * message's `id` when it had a well-formed one.
 */
export function parseClientMessage<T>(schema: z.ZodType<T>, data: string | Uint8Array, binary: boolean, maxBytes = MAX_MESSAGE_BYTES): Parsed<T> {
  const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  if (bytes > maxBytes)
    return { ok: false, error: errorMessage('message_too_large', `message of ${bytes} bytes exceeds the limit of ${maxBytes} bytes`, 'message') };
  if (binary) return { ok: false, error: errorMessage('invalid_json', `binary message of ${bytes} bytes: only JSON text messages are accepted`, 'message') };
  let json: unknown;
  try {
    json = JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString('utf8'));
  } catch (err) {
    return { ok: false, error: errorMessage('invalid_json', `malformed JSON: ${(err as Error).message}`, 'message') };
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    return {
      ok: false,
      error: errorMessage(
        'invalid_message',
        `a message must be a JSON object with a "type", got ${Array.isArray(json) ? 'an array' : json === null ? 'null' : typeof json}`,
        null,
      ),
    };
  }
  const id = MessageIdSchema.safeParse((json as { id?: unknown }).id);
  const replyTo = id.success ? id.data : null;
  const r = schema.safeParse(json);
  if (r.success) return { ok: true, value: r.data };
  const issue = r.error.issues[0]!;
  const param =
    issue.path.length === 0 ? (issue.code === 'invalid_union' || issue.code === 'invalid_type' ? 'type' : 'message') : issue.path.map(String).join('.');
  const unknownKeys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
  return {
    ok: false,
    error: errorMessage(
      'invalid_message',
      `${param}: ${issue.message}${unknownKeys}`,
      issue.code === 'unrecognized_keys' && issue.keys.length > 0 ? [...issue.path.map(String), issue.keys[0]!].join('.') : param,
      { replyTo },
    ),
  };
}
