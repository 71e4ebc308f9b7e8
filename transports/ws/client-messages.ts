import { z } from 'zod';
import { ActionSchema } from '../../src/request/action';
import { PromptSchema, VideoCreateBodySchema } from '../shared/video-request';

/** Video formats of a stream: fMP4 (init segment + one moof+mdat per frame) or raw H.264 (Annex-B access units). */
export const StreamFormatSchema = z.enum(['fmp4', 'h264']);
export type StreamFormat = z.infer<typeof StreamFormatSchema>;

/** `size` as "WxH" in pixels (as in `POST /v1/videos`). */
const SizeSchema = z
  .string()
  .regex(/^[1-9]\d{0,4}x[1-9]\d{0,4}$/, 'size must be "WIDTHxHEIGHT" in pixels, e.g. "64x64"')
  .transform((s) => {
    const [width, height] = s.split('x').map(Number);
    return { width: width!, height: height! };
  });

/** Largest initial frame of a session sent inline: 1024×1024 RGB24 is 3 MiB, more than a message may carry anyway. */
const MAX_IMAGE_BASE64_CHARS = 1_400_000;

/**
 * The client's own id of a message (any message may carry one): an `error` answering that message echoes it as
 * `replyTo`, so a client that pipelines messages can tell which one an error answers. Actions also get it back in
 * the `frame` messages of the frames generated with them.
 */
const MessageIdSchema = z.string().min(1).max(64);

/** Frames a generation's video is decoded and sent in, by default (`decode_chunk_frames`). */
export const DEFAULT_DECODE_CHUNK_FRAMES = 1;

/**
 * Starts a generation: `request` takes the fields of `POST /v1/videos` (docs/http.md) except `preview_every`: previews
 * are served on a job's SSE stream, and this stream carries only the video. `decode_chunk_frames`: the finished
 * latents are decoded this many frames at a time and each group is sent as soon as it is decoded (the engine's
 * `outputs.decodeChunkFrames`); 0 decodes the whole clip first, then sends it.
 */
export const GenerateMessageSchema = z.strictObject({
  type: z.literal('generate'),
  id: MessageIdSchema.optional(),
  format: StreamFormatSchema.default('fmp4'),
  decode_chunk_frames: z.number().int().min(0).max(256).default(DEFAULT_DECODE_CHUNK_FRAMES),
  request: VideoCreateBodySchema.omit({ preview_every: true }),
});

/** Starts a world session (`Engine.session`). `image` is the first frame, RGB24 at the session size, base64. */
export const SessionMessageSchema = z.strictObject({
  type: z.literal('session'),
  id: MessageIdSchema.optional(),
  format: StreamFormatSchema.default('fmp4'),
  model: z.string().min(1).max(128).optional(),
  prompt: PromptSchema,
  size: SizeSchema.optional(),
  fps: z.number().int().optional(),
  seed: z.number().int().optional(),
  /** η of the session's Euler steps (`Engine.session`'s `eta`: range checked there); the model's default when absent. */
  eta: z.number().optional(),
  image: z
    .strictObject({
      width: z.number().int(),
      height: z.number().int(),
      data: z.base64().max(MAX_IMAGE_BASE64_CHARS),
    })
    .optional(),
});

/** An action for the world session (key, optional 2-vector, optional id echoed in `frame` messages). */
export const ActionMessageSchema = ActionSchema.extend({ type: z.literal('action'), id: MessageIdSchema.optional() });

/** Grants credits: the client can take `frames` more frames (one per frame appended to its buffer or decoded). */
export const CreditMessageSchema = z.strictObject({
  type: z.literal('credit'),
  id: MessageIdSchema.optional(),
  frames: z.number().int().min(1).max(1_000_000),
});

export const FlushMessageSchema = z.strictObject({ type: z.literal('flush'), id: MessageIdSchema.optional() });
export const CloseMessageSchema = z.strictObject({ type: z.literal('close'), id: MessageIdSchema.optional() });

/** Every message a client may send on `/v1/stream`, by `type`. */
export const ClientMessageSchema = z.discriminatedUnion('type', [
  GenerateMessageSchema,
  SessionMessageSchema,
  ActionMessageSchema,
  CreditMessageSchema,
  FlushMessageSchema,
  CloseMessageSchema,
]);
export type ClientMessage = z.infer<typeof ClientMessageSchema>;
export type GenerateMessage = z.infer<typeof GenerateMessageSchema>;
export type SessionMessage = z.infer<typeof SessionMessageSchema>;

const TYPES = ClientMessageSchema.options.map((o) => o.shape.type.value);

/**
 * Why a client message was refused: a transport code, a message, the offending field as a dotted path, and the
 * message's `id` when it had a well-formed one (so even a refused message can be correlated).
 */
export interface MessageProblem {
  code: 'invalid_json' | 'invalid_message';
  message: string;
  param: string | null;
  replyTo: string | null;
}

/**
 * Parses one client message (the text of a WebSocket text message). Binary messages never reach here: the
 * connection refuses them by kind.
 * @returns the message, or the problem naming the field (`type`, `request.num_frames`, an unknown field by name)
 *   with the message's `id` (null when it had none, or when `id` itself is what is wrong).
 */
export function parseClientMessage(text: string): { ok: true; message: ClientMessage } | { ok: false; problem: MessageProblem } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, problem: { code: 'invalid_json', message: `the message is not valid JSON: ${(err as Error).message}`, param: null, replyTo: null } };
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return { ok: false, problem: { code: 'invalid_message', message: 'a message must be a JSON object with a "type"', param: null, replyTo: null } };
  }
  const id = Object.hasOwn(raw, 'id') ? MessageIdSchema.safeParse((raw as { id?: unknown }).id) : undefined;
  const replyTo = id?.success ? id.data : null;
  const type = (raw as { type?: unknown }).type;
  if (typeof type !== 'string' || !(TYPES as string[]).includes(type)) {
    const got = typeof type === 'string' ? `"${type.slice(0, 40)}"` : String(type === undefined ? 'nothing' : typeof type);
    return { ok: false, problem: { code: 'invalid_message', message: `type must be one of ${TYPES.join(', ')}; got ${got}`, param: 'type', replyTo } };
  }
  const r = ClientMessageSchema.safeParse(raw);
  if (r.success) return { ok: true, message: r.data };
  const issue = r.error.issues[0]!;
  const prefix = issue.path.map(String).join('.');
  const field = issue.code === 'unrecognized_keys' ? [prefix, issue.keys[0]].filter((s) => s !== '').join('.') : prefix;
  const what = issue.code === 'unrecognized_keys' ? `unknown field '${field}'` : `${field}: ${issue.message}`;
  return { ok: false, problem: { code: 'invalid_message', message: `${type}: ${what}`, param: field === '' ? null : field, replyTo } };
}
