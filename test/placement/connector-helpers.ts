import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  connectShm,
  connectTcp,
  createInProcessConnector,
  listenShm,
  listenTcp,
  type SocketStageReceiver,
  type StageReceiver,
  type StageSender,
} from '../../src/placement/connectors';
import { crc32Function } from '../../src/placement/crc32';
import { encodePayload } from '../../src/placement/payload-framing';
import { samplePayload } from './payload-fixtures';

export interface Link {
  sender: StageSender;
  receiver: StageReceiver;
  /** Closes both ends and removes temporary files. */
  dispose(): Promise<void>;
}

/** A private folder for socket and frame files. */
export function tempDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-link-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export type LinkKind = 'in-process' | 'shm' | 'tcp';

/** Opens a link of `kind` with a credit window of `credits` and waits until both ends are ready. */
export async function openLink(kind: LinkKind, credits: number, maxFrameBytes?: number): Promise<Link & { dir?: string }> {
  if (kind === 'in-process') {
    const { sender, receiver } = createInProcessConnector({ credits });
    return { sender, receiver, dispose: () => sender.close() };
  }
  const tmp = tempDir();
  let receiver: SocketStageReceiver;
  let sender: StageSender;
  if (kind === 'tcp') {
    receiver = listenTcp({ port: 0, credits, maxFrameBytes });
    await receiver.ready;
    sender = connectTcp({ port: (receiver.address() as { port: number }).port });
  } else {
    const socketPath = path.join(tmp.dir, 'link.sock');
    receiver = listenShm({ socketPath, dir: tmp.dir, credits, maxFrameBytes });
    await receiver.ready;
    sender = connectShm({ socketPath, dir: tmp.dir });
  }
  await sender.ready;
  return {
    sender,
    receiver,
    dir: tmp.dir,
    dispose: async () => {
      await sender.close();
      await receiver.close();
      tmp.remove();
    },
  };
}

/**
 * Waits until `cond` holds, re-checking after each timer turn (≥ 1 ms, so socket I/O gets to run); fails after
 * `turns` checks. This is a bound on a wait, never an assertion about how long something took.
 */
export async function until(cond: () => boolean, turns = 10000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`condition not reached after ${turns} checks: ${cond.toString()}`);
}

/** Tracks which of a set of promises settled, and how. */
export function track<T>(promises: Array<Promise<T>>): { settled: () => Array<'pending' | 'resolved' | string> } {
  const state: Array<'pending' | 'resolved' | string> = promises.map(() => 'pending');
  promises.forEach((p, i) =>
    p.then(
      () => (state[i] = 'resolved'),
      (e: Error) => (state[i] = e.message),
    ),
  );
  return { settled: () => [...state] };
}

/** A sound frame whose payload claims `schemaVersion` 2 (header edited in place, checksum recomputed). */
export function frameWithSchemaVersion2(requestId = 'v2'): Uint8Array {
  const frame = encodePayload(samplePayload(requestId));
  const len = new DataView(frame.buffer).getUint32(16, true);
  const text = Buffer.from(frame.subarray(24, 24 + len))
    .toString()
    .replace('"schemaVersion":1', '"schemaVersion":2');
  frame.set(Buffer.from(text), 24);
  const crc = crc32Function();
  new DataView(frame.buffer).setUint32(20, crc(frame.subarray(24), crc(frame.subarray(0, 20))), true);
  return frame;
}
