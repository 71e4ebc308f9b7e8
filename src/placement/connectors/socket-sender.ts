import { randomUUID } from 'node:crypto';
import { open, unlink } from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { OmniError } from '../../errors';
import { encodePayloadParts } from '../payload-framing';
import { PayloadError, type DiffusionStagePayload } from '../../pipeline/stage-payload';
import { CONTROL_PROTOCOL_VERSION, controlLine, ControlLineReader, parseControlLine, ReceiverMessageSchema, type ReceiverMessage } from './control-messages';
import { CreditWindow } from './credit-window';
import type { ListenAddress, PayloadCarriage } from './socket-receiver';
import { connectorClosed, type ConnectorState, type StageSender } from './stage-connector';

export interface SocketSenderOptions {
  connect: ListenAddress;
  carriage: PayloadCarriage;
  /** First wait before reconnecting after a lost or refused connection, ms; doubles up to `maxReconnectDelayMs`. Default 50. */
  reconnectDelayMs?: number;
  /** Longest wait between reconnect attempts, ms. Default 2000. */
  maxReconnectDelayMs?: number;
  /** Name in error messages. */
  name: string;
}

interface Unacked {
  requestId: string;
  resolve(): void;
  reject(e: unknown): void;
  /** The frame file to remove if the receiver never took it (shared-memory carriage). */
  file?: string;
}

function deferred(): { promise: Promise<void>; resolve(): void; reject(e: unknown): void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {});
  return { promise, resolve, reject };
}

/**
 * The sending end of a TCP or shared-memory link (see `connectTcp`, `connectShm`). It connects, and reconnects
 * with backoff whenever the link is lost; it is `ready` once the receiver's `hello` has granted its credit window.
 * A link loss fails only the payloads sent and not yet acknowledged (OMNIRX_ERR_CONNECTOR: the caller decides to
 * requeue or fail them); puts still waiting for credit wait for the next connection.
 */
export class SocketStageSender implements StageSender {
  readonly #options: Required<SocketSenderOptions>;
  readonly #window = new CreditWindow();
  readonly #unacked: Unacked[] = [];
  #state: ConnectorState = 'connecting';
  #readiness = deferred();
  #socket: net.Socket | null = null;
  /** Largest frame the current receiver accepts, bytes (from its hello). */
  #maxFrameBytes = 0;
  /** Reason the current connection is being dropped, for the errors of its unacknowledged puts. */
  #lostReason = '';
  #delayMs: number;
  #timer: NodeJS.Timeout | null = null;
  /** Puts are sent one after another, in call order. */
  #tail: Promise<void> = Promise.resolve();

  constructor(options: SocketSenderOptions) {
    this.#options = { ...options, reconnectDelayMs: options.reconnectDelayMs ?? 50, maxReconnectDelayMs: options.maxReconnectDelayMs ?? 2000 };
    this.#delayMs = this.#options.reconnectDelayMs;
    this.#connect();
  }

  get state(): ConnectorState {
    return this.#state;
  }

  get ready(): Promise<void> {
    return this.#state === 'closed' ? Promise.reject(connectorClosed(this.#options.name)) : this.#readiness.promise;
  }

  get credits(): number {
    return this.#window.credits;
  }

  async put(payload: DiffusionStagePayload): Promise<void> {
    if (this.#state === 'closed') throw connectorClosed(this.#options.name);
    const parts = encodePayloadParts(payload);
    const bytes = parts.reduce((n, p) => n + p.length, 0);
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise((resolve) => (release = resolve));
    let file: string | undefined;
    try {
      await previous;
      const carriage = this.#options.carriage;
      if (carriage !== 'inline') file = await this.#writeFile(carriage.dir, parts);
      for (;;) {
        await this.#window.acquire();
        if (this.#socket !== null && this.#state === 'ready') break;
      }
      if (bytes > this.#maxFrameBytes) {
        this.#window.grant(1);
        throw new PayloadError(
          `${this.#options.name}: payload ${payload.requestId} is ${bytes} bytes as a frame, more than the receiver's ${this.#maxFrameBytes}-byte limit`,
        );
      }
      const sent = file;
      file = undefined; // from here on the receiver (or the loss handler) removes it
      const accepted = new Promise<void>((resolve, reject) => this.#unacked.push({ requestId: payload.requestId, resolve, reject, file: sent }));
      const socket = this.#socket!;
      if (sent === undefined) {
        socket.cork();
        for (const p of parts) socket.write(p);
        socket.uncork();
      } else {
        socket.write(controlLine({ t: 'ref', name: path.basename(sent), bytes }));
      }
      release();
      return await accepted;
    } finally {
      release();
      if (file !== undefined) await unlink(file).catch(() => {});
    }
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    if (this.#timer !== null) clearTimeout(this.#timer);
    const error = connectorClosed(this.#options.name, ' (the payload was not accepted)');
    this.#window.close(error);
    this.#failUnacked(() => error);
    const socket = this.#socket;
    if (socket !== null && !socket.destroyed) await new Promise<void>((resolve) => socket.once('close', () => resolve()).destroy());
  }

  /** Writes a frame to a fresh file in `dir` with one gathered write. @returns its path. */
  async #writeFile(dir: string, parts: Uint8Array[]): Promise<string> {
    const file = path.join(dir, `omxp-${randomUUID()}.frame`);
    const fh = await open(file, 'wx', 0o600);
    try {
      await fh.writev(parts);
    } catch (e) {
      await unlink(file).catch(() => {});
      throw new OmniError('OMNIRX_ERR_CONNECTOR', `${this.#options.name}: cannot write the payload file ${file}: ${(e as Error).message}`, { cause: e });
    } finally {
      await fh.close();
    }
    return file;
  }

  #connect(): void {
    if (this.#state === 'closed') return;
    const socket = net.connect(this.#options.connect);
    this.#socket = socket;
    this.#lostReason = '';
    socket.setNoDelay(true);
    const lines = new ControlLineReader();
    socket.on('data', (chunk: Buffer) => {
      try {
        for (const line of lines.push(chunk)) this.#onMessage(parseControlLine(line, ReceiverMessageSchema));
      } catch (e) {
        this.#lostReason = (e as Error).message;
        socket.destroy();
      }
    });
    socket.on('error', (e) => {
      this.#lostReason ||= e.message;
    });
    socket.on('close', () => this.#onLost(socket));
  }

  #onMessage(m: ReceiverMessage): void {
    switch (m.t) {
      case 'hello':
        if (m.version !== CONTROL_PROTOCOL_VERSION)
          throw new OmniError('OMNIRX_ERR_CONNECTOR', `receiver speaks control protocol ${m.version}, this omnirx ${CONTROL_PROTOCOL_VERSION}`);
        this.#maxFrameBytes = m.maxFrameBytes;
        this.#delayMs = this.#options.reconnectDelayMs;
        this.#state = 'ready';
        this.#window.reset();
        this.#window.grant(m.credits);
        this.#readiness.resolve();
        return;
      case 'credit':
        this.#window.grant(m.n);
        return;
      case 'ack':
        this.#unackedHead().resolve();
        return;
      case 'reject':
        this.#unackedHead().reject(new PayloadError(`${this.#options.name}: the receiver refused payload: ${m.message}`));
        return;
      case 'error':
        this.#lostReason = `the receiver dropped the connection: ${m.message}`;
        return;
    }
  }

  #unackedHead(): Unacked {
    const head = this.#unacked.shift();
    if (head === undefined) throw new OmniError('OMNIRX_ERR_CONNECTOR', 'receiver acknowledged a payload that was never sent');
    return head;
  }

  /** The connection closed: fail what it carried unacknowledged, void its credits, reconnect after a backoff. */
  #onLost(socket: net.Socket): void {
    if (this.#socket !== socket) return;
    this.#socket = null;
    this.#window.reset();
    const reason = this.#lostReason || 'closed by the receiver';
    this.#failUnacked(
      (u) => new OmniError('OMNIRX_ERR_CONNECTOR', `${this.#options.name}: link lost before the receiver accepted payload ${u.requestId} (${reason})`),
    );
    if (this.#state === 'closed') return;
    if (this.#state === 'ready') this.#readiness = deferred();
    this.#state = 'connecting';
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#connect();
    }, this.#delayMs);
    this.#delayMs = Math.min(this.#delayMs * 2, this.#options.maxReconnectDelayMs);
  }

  #failUnacked(error: (u: Unacked) => OmniError): void {
    for (const u of this.#unacked.splice(0)) {
      u.reject(error(u));
      if (u.file !== undefined) void unlink(u.file).catch(() => {});
    }
  }
}
