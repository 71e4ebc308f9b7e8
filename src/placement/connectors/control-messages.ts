import { z } from 'zod';
import { OmniError } from '../../errors';

/** Version of the control protocol spoken on a socket link (hello, credit, ack, reject, ref). */
export const CONTROL_PROTOCOL_VERSION = 1;
/** Longest control line accepted, bytes (a `reject` carries an error message; refs carry a file name). */
export const MAX_CONTROL_LINE_BYTES = 8192;

/** Receiver → sender, one JSON object per line. */
export const ReceiverMessageSchema = z.discriminatedUnion('t', [
  /** First line of every connection: protocol version, the initial credit window, the largest frame accepted (bytes). */
  z.strictObject({ t: z.literal('hello'), version: z.number().int(), credits: z.number().int().min(1).max(65536), maxFrameBytes: z.number().int().min(24) }),
  /** `n` more payloads may be sent. */
  z.strictObject({ t: z.literal('credit'), n: z.number().int().min(1).max(65536) }),
  /** The oldest unacknowledged payload was accepted into the receiver's queue. */
  z.strictObject({ t: z.literal('ack') }),
  /** The oldest unacknowledged payload was refused (its credit comes back as a separate `credit`). */
  z.strictObject({ t: z.literal('reject'), code: z.string().max(64), message: z.string().max(4096) }),
  /** Why the receiver is about to drop this connection. */
  z.strictObject({ t: z.literal('error'), message: z.string().max(4096) }),
]);
export type ReceiverMessage = z.infer<typeof ReceiverMessageSchema>;

/** Sender → receiver on a shared-memory link: a frame was written to `name` in the link's folder (`bytes` long). */
export const PayloadRefSchema = z.strictObject({
  t: z.literal('ref'),
  name: z.string().regex(/^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}$/, 'a payload file name is up to 200 of [A-Za-z0-9_.-], not starting with a dot'),
  bytes: z.number().int().min(24),
});
export type PayloadRef = z.infer<typeof PayloadRefSchema>;

/** One control message as a line of JSON. */
export function controlLine(message: ReceiverMessage | PayloadRef): string {
  return `${JSON.stringify(message)}\n`;
}

/**
 * Splits a byte stream into newline-terminated control lines, refusing any line longer than
 * `MAX_CONTROL_LINE_BYTES` before buffering more of it.
 */
export class ControlLineReader {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** Stream offset of the first pending byte. */
  #offset = 0;

  /** @returns the complete lines in this chunk. @throws OmniError OMNIRX_ERR_CONNECTOR for an over-long line. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      if (this.#pendingBytes + (nl - start) > MAX_CONTROL_LINE_BYTES) this.#tooLong();
      this.#pending.push(chunk.subarray(start, nl));
      lines.push(Buffer.concat(this.#pending).toString('utf8'));
      this.#offset += this.#pendingBytes + (nl - start) + 1;
      this.#pending = [];
      this.#pendingBytes = 0;
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.#pending.push(chunk.subarray(start));
      this.#pendingBytes += chunk.length - start;
    }
    if (this.#pendingBytes > MAX_CONTROL_LINE_BYTES) this.#tooLong();
    return lines;
  }

  #tooLong(): never {
    throw new OmniError('OMNIRX_ERR_CONNECTOR', `control stream at byte ${this.#offset}: a line longer than ${MAX_CONTROL_LINE_BYTES} bytes`);
  }
}

/** Parses one control line against `schema`. @throws OmniError OMNIRX_ERR_CONNECTOR naming the problem. */
export function parseControlLine<T>(line: string, schema: z.ZodType<T>): T {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_CONNECTOR', `control line is not JSON (${(e as Error).message})`);
  }
  const r = schema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new OmniError('OMNIRX_ERR_CONNECTOR', `control line: ${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`);
  }
  return r.data;
}
