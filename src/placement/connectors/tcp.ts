import { SocketStageReceiver } from './socket-receiver';
import { SocketStageSender } from './socket-sender';

export interface TcpListenOptions {
  /** Port to listen on; 0 picks a free one (read it back with `address()`). */
  port: number;
  /** Interface to bind. Default 127.0.0.1 (stages on other hosts must name one). */
  host?: string;
  /** Credit window per sender connection. Default 4. */
  credits?: number;
  /** Largest frame accepted, bytes. Default 256 MiB. */
  maxFrameBytes?: number;
  /** Sender connections served at once. Default 16. */
  maxConnections?: number;
}

/** The receiving end of a stage link between hosts: OMXP frames inline in a TCP stream. */
export function listenTcp(options: TcpListenOptions): SocketStageReceiver {
  const host = options.host ?? '127.0.0.1';
  const { port, ...rest } = options;
  return new SocketStageReceiver({ ...rest, listen: { port, host }, carriage: 'inline', name: `tcp receiver ${host}:${port}` });
}

export interface TcpConnectOptions {
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** First reconnect delay, ms (doubles up to `maxReconnectDelayMs`). Default 50. */
  reconnectDelayMs?: number;
  /** Default 2000 ms. */
  maxReconnectDelayMs?: number;
}

/** The sending end of a stage link between hosts (see `listenTcp`). */
export function connectTcp(options: TcpConnectOptions): SocketStageSender {
  const host = options.host ?? '127.0.0.1';
  const { port, ...rest } = options;
  return new SocketStageSender({ ...rest, connect: { port, host }, carriage: 'inline', name: `tcp sender to ${host}:${port}` });
}
