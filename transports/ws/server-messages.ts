import type { RolloutInfo } from '../../src/request/omni-event';

/** Text messages the server sends on `/v1/stream` (docs/streaming.md, "WebSocket protocol"). */
export type ServerMessage =
  | { type: 'queued'; position: number }
  | { type: 'admitted'; id: string; model: string; params: Record<string, number | string | boolean> }
  /** Before the first binary message. `codec` is the RFC 6381 string (`video/mp4; codecs="…"` for MSE). */
  | { type: 'init'; format: 'fmp4' | 'h264'; codec: string; width: number; height: number; fps: number }
  /** One denoise step finished: `step` is 1-based, of `total` in node `node`; `ms` its wall time. */
  | { type: 'progress'; node: string; step: number; total: number; ms: number }
  /**
   * Sent just before the frame's binary message. `pts` is the frame index, `ptsMs` its presentation time (ms);
   * world sessions add the chunk index and the action the chunk was generated with.
   */
  | { type: 'frame'; pts: number; ptsMs: number; keyframe: boolean; bytes: number; chunk: number | null; action: RolloutInfo['action'] | null }
  /** The stream finished (`frames` sent) or was closed by the client (`reason` "closed"). */
  | { type: 'end'; frames: number; reason: 'completed' | 'closed' }
  /**
   * A refused message (the stream keeps going) or, with `fatal`, the failure that ended the stream (the socket is
   * closed next). `param` names the offending field as a dotted path, or null. `replyTo` is the `id` of the client
   * message it answers (a refused message's own id; for a failure of the stream, the start message's id), or null
   * when that message had no id or the error answers no message (a slow consumer).
   */
  | { type: 'error'; code: string; message: string; param: string | null; fatal: boolean; replyTo: string | null };

/** An error as sent to the client. */
export type ErrorMessage = Extract<ServerMessage, { type: 'error' }>;

/**
 * Turns anything thrown or emitted as a failure (an OmniError, an HttpError, an engine `error` event, an Error)
 * into an error message answering the client message `replyTo`; `fieldOf` maps the error's `param` to the client's
 * field name.
 */
export function toErrorMessage(
  err: unknown,
  fatal: boolean,
  replyTo: string | null,
  fieldOf: (param: string | undefined) => string | null = (p) => p ?? null,
): ErrorMessage {
  const e = (err ?? {}) as { code?: unknown; message?: unknown; param?: unknown };
  const code = typeof e.code === 'string' ? e.code : 'OMNIRX_ERR_INTERNAL';
  const message = typeof e.message === 'string' ? e.message : String(err);
  const param = typeof e.param === 'string' ? fieldOf(e.param) : null;
  return { type: 'error', code, message, param, fatal, replyTo };
}
