/**
 * The `bufferedAmount` guard of `/v1/stream` (transports/ws/stream-connection.ts): before every send the connection
 * checks how many bytes the socket still holds; over `maxBufferedBytes` it sends one fatal `slow_consumer` error,
 * closes with 1008 and frees the stream. A real socket only gets there after the kernel buffers (megabytes on
 * loopback) fill, so the socket here is a stand-in whose `bufferedAmount` the test sets.
 */
import { EventEmitter } from 'node:events';
import { WebSocket } from 'ws';
import { StreamConnection } from '../../../transports/ws/stream-connection';

class FakeSocket extends EventEmitter {
  readyState: number = WebSocket.OPEN;
  bufferedAmount = 0;
  readonly sent: unknown[] = [];
  closedWith?: number;
  send(data: unknown): void {
    this.sent.push(typeof data === 'string' ? JSON.parse(data) : data);
  }
  close(code: number): void {
    this.closedWith = code;
    this.readyState = WebSocket.CLOSED;
  }
  /** A text message from the client. */
  receive(message: unknown): void {
    this.emit('message', Buffer.from(JSON.stringify(message)), false);
  }
}

function connect(maxBufferedBytes: number): FakeSocket {
  const ws = new FakeSocket();
  const engine = () => {
    throw Object.assign(new Error('no engine in this test'), { code: 'OMNIRX_ERR_NOT_READY' });
  };
  new StreamConnection(ws as unknown as WebSocket, { engine, admitting: () => undefined, ffmpegPath: async () => 'ffmpeg', maxCredits: 64, maxBufferedBytes });
  return ws;
}

describe('/v1/stream slow-consumer guard', () => {
  it('under the limit, messages are answered as usual', () => {
    const ws = connect(1000);
    ws.bufferedAmount = 1000;
    ws.receive({ type: 'flush', id: 'f1' });
    expect(ws.sent).toEqual([expect.objectContaining({ type: 'error', code: 'not_started', fatal: false, replyTo: 'f1' })]);
    expect(ws.closedWith).toBeUndefined();
  });

  it('over the limit, the next send is replaced by one fatal slow_consumer error and close 1008; later messages get nothing', () => {
    const ws = connect(1000);
    ws.bufferedAmount = 1001;
    ws.receive({ type: 'flush', id: 'f1' });
    expect(ws.sent).toEqual([
      {
        type: 'error',
        code: 'slow_consumer',
        message: expect.stringMatching(/1001 bytes are waiting.*limit is 1000/),
        param: null,
        fatal: true,
        replyTo: null,
      },
    ]);
    expect(ws.closedWith).toBe(1008);
    ws.readyState = WebSocket.OPEN; // even if the socket still took messages, the connection has ended
    ws.bufferedAmount = 0;
    ws.receive({ type: 'flush' });
    ws.receive({ type: 'credit', frames: 1 });
    expect(ws.sent).toHaveLength(1);
  });
});
