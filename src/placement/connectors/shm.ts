import { accessSync, constants as fsConstants, lstatSync, unlinkSync } from 'node:fs';
import * as os from 'node:os';
import { SocketStageReceiver } from './socket-receiver';
import { SocketStageSender } from './socket-sender';

/** `/dev/shm` (tmpfs: frame files live in RAM pages) where it exists and is writable, else the OS temp folder. */
export function defaultShmDir(): string {
  try {
    accessSync('/dev/shm', fsConstants.W_OK);
    return '/dev/shm';
  } catch {
    return os.tmpdir();
  }
}

export interface ShmLinkOptions {
  /** Unix domain socket of the link's control channel (credits, acks, frame file names). */
  socketPath: string;
  /** Folder of the frame files, the same for both ends; only the receiver reads and removes them. Default `defaultShmDir()`. */
  dir?: string;
}

export interface ShmListenOptions extends ShmLinkOptions {
  /** Credit window per sender connection. Default 4. */
  credits?: number;
  /** Largest frame accepted, bytes. Default 256 MiB. */
  maxFrameBytes?: number;
  /** Sender connections served at once. Default 16. */
  maxConnections?: number;
}

/**
 * The receiving end of a stage link between processes on one host. Each frame is written by the sender to a file
 * in `dir` (tmpfs) with one gathered write and read by the receiver with one read into an 8-aligned buffer; only
 * its name crosses the Unix socket. A stale socket file left by a dead receiver is removed first.
 */
export function listenShm(options: ShmListenOptions): SocketStageReceiver {
  const { socketPath, dir = defaultShmDir(), ...rest } = options;
  try {
    if (lstatSync(socketPath).isSocket()) unlinkSync(socketPath);
  } catch {
    // no stale socket
  }
  return new SocketStageReceiver({ ...rest, listen: { path: socketPath }, carriage: { dir }, name: `shm receiver ${socketPath}` });
}

export interface ShmConnectOptions extends ShmLinkOptions {
  /** First reconnect delay, ms (doubles up to `maxReconnectDelayMs`). Default 50. */
  reconnectDelayMs?: number;
  /** Default 2000 ms. */
  maxReconnectDelayMs?: number;
}

/** The sending end of a stage link between processes on one host (see `listenShm`). */
export function connectShm(options: ShmConnectOptions): SocketStageSender {
  const { socketPath, dir = defaultShmDir(), ...rest } = options;
  return new SocketStageSender({ ...rest, connect: { path: socketPath }, carriage: { dir }, name: `shm sender to ${socketPath}` });
}
