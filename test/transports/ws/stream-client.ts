import WebSocket from 'ws';

/** A message received on `/v1/stream`: a parsed JSON text message, or a binary one. */
export type Received = { kind: 'json'; data: Record<string, unknown> & { type: string } } | { kind: 'binary'; data: Buffer };

/**
 * A Node test client of `/v1/stream` (the `ws` package): records every message in order; `wait(pred)` resolves
 * with the first recorded message (past or future) matching `pred` that was not consumed by an earlier wait.
 */
export class StreamClient {
  readonly received: Received[] = [];
  /** Resolves with the close code and reason once the socket closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<{ pred: (m: Received) => boolean; resolve: (m: Received) => void }> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const m: Received = isBinary ? { kind: 'binary', data } : { kind: 'json', data: JSON.parse(data.toString('utf8')) };
      this.received.push(m);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(m)) return true;
        w.resolve(m);
        return false;
      });
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  /** Connects to `origin` (`http://127.0.0.1:PORT`) + `path`. */
  static async connect(origin: string, path = '/v1/stream', headers: Record<string, string> = {}): Promise<StreamClient> {
    const ws = new WebSocket(origin.replace(/^http/, 'ws') + path, { headers });
    const c = new StreamClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return c;
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The JSON messages of type `type` received so far. */
  json(type: string): Array<Record<string, unknown>> {
    return this.received.filter((m) => m.kind === 'json' && m.data.type === type).map((m) => m.data as Record<string, unknown>);
  }

  /** The binary messages received so far. */
  binaries(): Buffer[] {
    return this.received.filter((m): m is Extract<Received, { kind: 'binary' }> => m.kind === 'binary').map((m) => m.data);
  }

  /** Resolves with the first message matching `pred`, already received or not. */
  wait(pred: (m: Received) => boolean): Promise<Received> {
    const seen = this.received.find(pred);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }

  /** Resolves with the JSON message of type `type` for which `pred` holds (default: the first). */
  async waitJson(type: string, pred: (d: Record<string, unknown>) => boolean = () => true): Promise<Record<string, unknown>> {
    const m = await this.wait((r) => r.kind === 'json' && r.data.type === type && pred(r.data));
    return m.data as Record<string, unknown>;
  }

  /** Resolves once `n` binary messages were received. */
  async waitBinaries(n: number): Promise<Buffer[]> {
    while (this.binaries().length < n) await this.wait((r) => r.kind === 'binary' && this.binaries().length >= n);
    return this.binaries();
  }
}
