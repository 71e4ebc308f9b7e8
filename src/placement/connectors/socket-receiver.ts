import { constants as fsConstants } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import { Subject, type Observable } from 'rxjs';
import { OmniError } from '../../errors';
import { decodePayload, PayloadFrameReader, type FrameResult } from '../payload-framing';
import { PayloadError, type DiffusionStagePayload } from '../../pipeline/stage-payload';
import { CONTROL_PROTOCOL_VERSION, controlLine, ControlLineReader, parseControlLine, PayloadRefSchema, type PayloadRef } from './control-messages';
import { ReceiveQueue } from './receive-queue';
import { connectorClosed, type ConnectorState, type StageReceiver } from './stage-connector';

/** Where a socket receiver listens: a TCP port (0 picks a free one) or a Unix domain socket path. */
export type ListenAddress = { port: number; host?: string } | { path: string };

/** How payload bytes travel: inside the socket stream (`inline`), or as frame files in `dir` named on the socket. */
export type PayloadCarriage = 'inline' | { dir: string };

export interface SocketReceiverOptions {
  listen: ListenAddress;
  carriage: PayloadCarriage;
  /** Credit window per connection: payloads a sender may have unaccepted-and-untaken at once. Default 4. */
  credits?: number;
  /** Largest frame accepted, bytes; a sender announcing a larger one is disconnected before it is buffered. Default 256 MiB. */
  maxFrameBytes?: number;
  /** Sender connections served at once; further ones are refused by the OS listener. Default 16. */
  maxConnections?: number;
  /** Name in error messages. */
  name: string;
}

/** Something that went wrong with one sender while the receiver kept serving. */
export interface ReceiverFault {
  /** `rejected`: one payload was refused and the connection kept; `dropped`: the connection was closed. */
  kind: 'rejected' | 'dropped';
  error: OmniError;
}

interface Connection {
  socket: net.Socket;
  /** Credits granted on this connection and not yet used by an arriving payload. */
  credit: number;
  live: boolean;
}

/**
 * The receiving end of a TCP or shared-memory link (see `listenTcp`, `listenShm`). Every connection gets a
 * `hello` with its credit window; every payload is acknowledged (`ack`) or refused (`reject`) in arrival order, and
 * its credit returns when the consumer takes it. A malformed payload is refused and the connection kept; a stream
 * out of sync (garbage, an oversized frame, a payload sent without credit, a bad control line) drops that
 * connection only. Both are reported on `faults$`.
 */
export class SocketStageReceiver implements StageReceiver {
  readonly #options: Required<Omit<SocketReceiverOptions, 'listen' | 'carriage'>> & Pick<SocketReceiverOptions, 'listen' | 'carriage'>;
  readonly #server: net.Server;
  readonly #queue: ReceiveQueue;
  readonly #connections = new Set<Connection>();
  readonly #faults = new Subject<ReceiverFault>();
  readonly #ready: Promise<void>;
  #state: ConnectorState = 'connecting';

  constructor(options: SocketReceiverOptions) {
    this.#options = {
      ...options,
      credits: options.credits ?? 4,
      maxFrameBytes: options.maxFrameBytes ?? 256 * 2 ** 20,
      maxConnections: options.maxConnections ?? 16,
    };
    const { credits, maxFrameBytes } = this.#options;
    if (!Number.isSafeInteger(credits) || credits < 1 || credits > 65536)
      throw new RangeError(`${options.name}: credits must be an integer in [1, 65536], got ${credits}`);
    if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < 24)
      throw new RangeError(`${options.name}: maxFrameBytes must be an integer ≥ 24, got ${maxFrameBytes}`);
    this.#queue = new ReceiveQueue(options.name);
    this.#server = net.createServer((socket) => this.#serve(socket));
    this.#server.maxConnections = this.#options.maxConnections;
    this.#ready = new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(options.listen, () => {
        this.#server.off('error', reject);
        this.#state = 'ready';
        resolve();
      });
    });
    this.#ready.catch(() => {
      this.#state = 'closed';
    });
  }

  get state(): ConnectorState {
    return this.#state;
  }

  get ready(): Promise<void> {
    return this.#state === 'closed' ? Promise.reject(connectorClosed(this.#options.name)) : this.#ready;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** Payloads refused and connections dropped, as they happen. Completes on `close()`. */
  get faults$(): Observable<ReceiverFault> {
    return this.#faults.asObservable();
  }

  /** The bound address: `{ port, host }` for TCP (with the port the OS picked), the socket path otherwise. */
  address(): ListenAddress {
    const a = this.#server.address();
    if (a === null) throw connectorClosed(this.#options.name, ' (not listening)');
    return typeof a === 'string' ? { path: a } : { port: a.port, host: a.address };
  }

  get(): Promise<DiffusionStagePayload> {
    return this.#queue.get();
  }

  get payloads$(): Observable<DiffusionStagePayload> {
    return this.#queue.payloads$;
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#queue.close();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const c of this.#connections) this.#drop(c, null);
    this.#faults.complete();
    await closed;
  }

  #serve(socket: net.Socket): void {
    const conn: Connection = { socket, credit: this.#options.credits, live: true };
    this.#connections.add(conn);
    socket.setNoDelay(true);
    socket.on('error', (e) => this.#drop(conn, new OmniError('OMNIRX_ERR_CONNECTOR', `${this.#options.name}: connection error: ${e.message}`, { cause: e })));
    socket.on('close', () => this.#drop(conn, null));
    socket.write(controlLine({ t: 'hello', version: CONTROL_PROTOCOL_VERSION, credits: this.#options.credits, maxFrameBytes: this.#options.maxFrameBytes }));
    if (this.#options.carriage === 'inline') this.#readFrames(conn);
    else this.#readRefs(conn, this.#options.carriage.dir);
  }

  /** Inline carriage: frames straight from the socket stream. */
  #readFrames(conn: Connection): void {
    const reader = new PayloadFrameReader(this.#options.maxFrameBytes);
    conn.socket.on('data', (chunk: Buffer) => {
      let results: FrameResult[];
      try {
        results = reader.push(chunk);
      } catch (e) {
        this.#drop(conn, e as OmniError);
        return;
      }
      for (const r of results) if (conn.live) this.#deliver(conn, r);
    });
    conn.socket.on('end', () => {
      try {
        reader.end();
        conn.socket.end();
      } catch (e) {
        this.#drop(conn, e as OmniError);
      }
    });
  }

  /** Shared-memory carriage: the socket names frame files in `dir`; each is read in order, then unlinked. */
  #readRefs(conn: Connection, dir: string): void {
    const lines = new ControlLineReader();
    let chain = Promise.resolve();
    conn.socket.on('data', (chunk: Buffer) => {
      let refs: PayloadRef[];
      try {
        refs = lines.push(chunk).map((l) => parseControlLine(l, PayloadRefSchema));
      } catch (e) {
        this.#drop(conn, e as OmniError);
        return;
      }
      for (const ref of refs) {
        if (!this.#spendCredit(conn)) return;
        chain = chain.then(() => this.#readRef(conn, dir, ref));
      }
    });
    conn.socket.on('end', () => void chain.then(() => conn.socket.end()));
  }

  async #readRef(conn: Connection, dir: string, ref: PayloadRef): Promise<void> {
    const file = path.join(dir, ref.name);
    let result: FrameResult;
    try {
      if (ref.bytes > this.#options.maxFrameBytes)
        throw new PayloadError(`payload file ${file}: ${ref.bytes} bytes exceeds the ${this.#options.maxFrameBytes}-byte limit`);
      const buf = new Uint8Array(ref.bytes);
      const fh = await open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      try {
        const { bytesRead } = await fh.read(buf, 0, ref.bytes, 0);
        if (bytesRead !== ref.bytes)
          throw new PayloadError(`payload file ${file} at byte ${bytesRead}: truncated: ${bytesRead} of ${ref.bytes} bytes`, { byteOffset: bytesRead });
      } finally {
        await fh.close();
      }
      result = { ok: true, payload: decodePayload(buf), frameBytes: ref.bytes };
    } catch (e) {
      const error = e instanceof PayloadError ? e : new PayloadError(`payload file ${file}: ${(e as Error).message}`, { cause: e });
      result = { ok: false, error, frameBytes: ref.bytes };
    } finally {
      await unlink(file).catch(() => {});
    }
    if (conn.live) this.#deliver(conn, result, false);
  }

  /** Counts one arriving payload against the connection's credit; a payload sent without credit drops the connection. */
  #spendCredit(conn: Connection): boolean {
    if (conn.credit > 0) {
      conn.credit--;
      return true;
    }
    this.#drop(conn, new OmniError('OMNIRX_ERR_CONNECTOR', `${this.#options.name}: a sender sent a payload without credit`));
    return false;
  }

  /** Queues and acknowledges an accepted payload, or refuses a rejected one and returns its credit. */
  #deliver(conn: Connection, r: FrameResult, spend = true): void {
    if (spend && !this.#spendCredit(conn)) return;
    const { socket } = conn;
    if (!r.ok) {
      socket.write(controlLine({ t: 'reject', code: r.error.code, message: r.error.message.slice(0, 4096) }));
      this.#grant(conn);
      this.#faults.next({ kind: 'rejected', error: r.error });
      return;
    }
    if (this.#queue.closed) return;
    this.#queue.accept(r.payload, () => this.#grant(conn));
    socket.write(controlLine({ t: 'ack' }));
  }

  #grant(conn: Connection): void {
    if (!conn.live) return;
    conn.credit++;
    conn.socket.write(controlLine({ t: 'credit', n: 1 }));
  }

  /** Closes one connection; `error` (if any) is told to the sender and reported on `faults$`. Idempotent. */
  #drop(conn: Connection, error: OmniError | null): void {
    if (!conn.live) return;
    conn.live = false;
    this.#connections.delete(conn);
    if (error !== null) {
      conn.socket.end(controlLine({ t: 'error', message: error.message.slice(0, 4096) }));
      conn.socket.destroySoon();
      this.#faults.next({ kind: 'dropped', error });
    } else {
      conn.socket.destroy();
    }
  }
}
