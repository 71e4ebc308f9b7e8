import * as net from 'node:net';
import * as path from 'node:path';
import { firstValueFrom, take, toArray } from 'rxjs';
import { connectShm, connectTcp, listenShm, listenTcp, type ReceiverFault, type SocketStageReceiver } from '../../src/placement/connectors';
import { encodePayload } from '../../src/placement/payload-framing';
import { float32Tensor, PayloadError } from '../../src/pipeline/stage-payload';
import { frameWithSchemaVersion2, tempDir, track, until } from './connector-helpers';
import { samplePayload } from './payload-fixtures';

/** A hand-driven peer of a receiver: writes raw bytes, records the control lines it gets back and when it is closed. */
async function rawPeer(address: net.NetConnectOpts): Promise<{ socket: net.Socket; lines: Array<Record<string, unknown>>; closed: Promise<void> }> {
  const socket = net.connect(address);
  const lines: Array<Record<string, unknown>> = [];
  let text = '';
  socket.on('data', (c: Buffer) => {
    text += c.toString();
    const parts = text.split('\n');
    text = parts.pop()!;
    for (const p of parts) lines.push(JSON.parse(p) as Record<string, unknown>);
  });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => {});
  await until(() => lines.length > 0);
  return { socket, lines, closed };
}

function faults(receiver: SocketStageReceiver, n: number): Promise<ReceiverFault[]> {
  return firstValueFrom(receiver.faults$.pipe(take(n), toArray()));
}

async function tcpReceiver(options: { credits?: number; maxFrameBytes?: number } = {}) {
  const receiver = listenTcp({ port: 0, ...options });
  await receiver.ready;
  const { port } = receiver.address() as { port: number };
  return { receiver, port };
}

/** Proves the receiver still serves: a fresh sender puts a payload that the receiver gets. */
async function stillServes(receiver: SocketStageReceiver, port: number): Promise<string> {
  const sender = connectTcp({ port });
  await sender.put(samplePayload('after'));
  await sender.close();
  return (await receiver.get()).requestId;
}

describe('tcp receiver under hostile input', () => {
  it('drops a connection that sends garbage, says why, and keeps serving others', async () => {
    const { receiver, port } = await tcpReceiver();
    const fault = faults(receiver, 1);
    const peer = await rawPeer({ port, host: '127.0.0.1' });
    expect(peer.lines[0]).toEqual({ t: 'hello', version: 1, credits: 4, maxFrameBytes: 256 * 2 ** 20 });
    peer.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await peer.closed;
    const [f] = await fault;
    expect(f!.kind).toBe('dropped');
    expect(f!.error.message).toBe('payload frame at byte 0: bad magic (expected "OMXP", got bytes 0x47 0x45 0x54 0x20)');
    expect(peer.lines[1]).toEqual({ t: 'error', message: f!.error.message });
    expect(await stillServes(receiver, port)).toBe('after');
    await receiver.close();
  });

  it('reports a frame truncated by the end of the stream, and keeps serving', async () => {
    const { receiver, port } = await tcpReceiver();
    const fault = faults(receiver, 1);
    const peer = await rawPeer({ port, host: '127.0.0.1' });
    const frame = encodePayload(samplePayload());
    peer.socket.end(frame.subarray(0, 50));
    const [f] = await fault;
    expect(f!.kind).toBe('dropped');
    expect(f!.error.message).toBe(`payload stream at byte 50: truncated: the stream ended 50 bytes into a frame of ${frame.length} bytes (starting at byte 0)`);
    expect(await stillServes(receiver, port)).toBe('after');
    await receiver.close();
  });

  it('refuses a payload of a newer schema version, returns its credit and keeps the connection', async () => {
    const { receiver, port } = await tcpReceiver({ credits: 1 });
    const fault = faults(receiver, 1);
    const peer = await rawPeer({ port, host: '127.0.0.1' });
    peer.socket.write(frameWithSchemaVersion2());
    await until(() => peer.lines.length === 3);
    const message = 'frame at stream byte 0: payload frame header at byte 24: payload schema version 2 is newer than this omnirx (1)';
    expect(peer.lines.slice(1)).toEqual([
      { t: 'reject', code: 'OMNIRX_ERR_PAYLOAD', message },
      { t: 'credit', n: 1 },
    ]);
    expect((await fault)[0]).toMatchObject({ kind: 'rejected', error: { code: 'OMNIRX_ERR_PAYLOAD', message } });
    peer.socket.write(encodePayload(samplePayload('ok')));
    await until(() => peer.lines.length === 4);
    expect(peer.lines[3]).toEqual({ t: 'ack' });
    expect((await receiver.get()).requestId).toBe('ok');
    peer.socket.destroy();
    await receiver.close();
  });

  it('drops a sender that sends more payloads than it has credit for, so nothing piles up', async () => {
    const { receiver, port } = await tcpReceiver({ credits: 2 });
    const fault = faults(receiver, 1);
    const peer = await rawPeer({ port, host: '127.0.0.1' });
    peer.socket.write(Buffer.concat([0, 1, 2].map((i) => encodePayload(samplePayload(`r${i}`)))));
    await peer.closed;
    expect(peer.lines.slice(1)).toEqual([
      { t: 'ack' },
      { t: 'ack' },
      { t: 'error', message: 'tcp receiver 127.0.0.1:0: a sender sent a payload without credit' },
    ]);
    expect((await fault)[0]!.kind).toBe('dropped');
    expect(receiver.queued).toBe(2);
    await receiver.close();
  });

  it('refuses an oversized frame before buffering it; a sender refuses such a put locally', async () => {
    const { receiver, port } = await tcpReceiver({ maxFrameBytes: 1024 });
    const fault = faults(receiver, 1);
    const big = samplePayload('big');
    big.tensors.latents = float32Tensor(new Float32Array(1000), [1000]);
    const frame = encodePayload(big);
    const peer = await rawPeer({ port, host: '127.0.0.1' });
    peer.socket.write(frame.subarray(0, 16));
    await peer.closed;
    expect((await fault)[0]!.error.message).toBe(`payload stream at byte 8: a frame of ${frame.length} bytes exceeds the 1024-byte limit`);

    const sender = connectTcp({ port });
    await sender.ready;
    const refused = sender.put(big);
    await expect(refused).rejects.toThrow(PayloadError);
    await expect(refused).rejects.toThrow(
      `tcp sender to 127.0.0.1:${port}: payload big is ${frame.length} bytes as a frame, more than the receiver's 1024-byte limit`,
    );
    await sender.put(samplePayload('small'));
    expect((await receiver.get()).requestId).toBe('small');
    await sender.close();
    await receiver.close();
  });
});

describe('tcp sender across link loss', () => {
  it('fails the unacknowledged put, reconnects, and sends the next one', async () => {
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      socket.write('{"t":"hello","version":1,"credits":1,"maxFrameBytes":1048576}\n');
      const first = connections === 1;
      socket.once('data', () => (first ? socket.destroy() : socket.write('{"t":"ack"}\n')));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as net.AddressInfo;
    const sender = connectTcp({ port, reconnectDelayMs: 1 });
    await sender.ready;
    const lost = sender.put(samplePayload('r1'));
    await expect(lost).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONNECTOR' });
    await expect(lost).rejects.toThrow(`tcp sender to 127.0.0.1:${port}: link lost before the receiver accepted payload r1 (closed by the receiver)`);
    await sender.ready;
    expect(sender.state).toBe('ready');
    await sender.put(samplePayload('r2'));
    expect(connections).toBe(2);
    await sender.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});

describe('shm link', () => {
  it('keeps puts that wait for credit across a receiver restart', async () => {
    const tmp = tempDir();
    const socketPath = path.join(tmp.dir, 'link.sock');
    const first = listenShm({ socketPath, dir: tmp.dir, credits: 1 });
    await first.ready;
    const sender = connectShm({ socketPath, dir: tmp.dir, reconnectDelayMs: 1 });
    await sender.put(samplePayload('r1'));
    const puts = track([sender.put(samplePayload('r2'))]);
    await first.close();
    await until(() => sender.state === 'connecting');
    expect(puts.settled()).toEqual(['pending']);
    const second = listenShm({ socketPath, dir: tmp.dir, credits: 1 });
    await until(() => puts.settled()[0] === 'resolved');
    expect((await second.get()).requestId).toBe('r2');
    await sender.close();
    await second.close();
    tmp.remove();
  });

  it('drops a peer naming a file outside its folder, refuses a missing file, and keeps serving', async () => {
    const tmp = tempDir();
    const socketPath = path.join(tmp.dir, 'link.sock');
    const receiver = listenShm({ socketPath, dir: tmp.dir });
    await receiver.ready;
    const seen = faults(receiver, 2);
    const missing = await rawPeer({ path: socketPath });
    missing.socket.write('{"t":"ref","name":"nope.frame","bytes":64}\n');
    await until(() => missing.lines.length === 3);
    expect(missing.lines[1]).toMatchObject({ t: 'reject', code: 'OMNIRX_ERR_PAYLOAD' });
    expect(missing.lines[1]!.message).toMatch(/^payload file .*nope\.frame: ENOENT/);
    const escape = await rawPeer({ path: socketPath });
    escape.socket.write('{"t":"ref","name":"../outside.frame","bytes":64}\n');
    await escape.closed;
    const [rejected, dropped] = await seen;
    expect(rejected!.kind).toBe('rejected');
    expect(dropped!.kind).toBe('dropped');
    expect(dropped!.error.message).toBe('control line: name: a payload file name is up to 200 of [A-Za-z0-9_.-], not starting with a dot');
    const sender = connectShm({ socketPath, dir: tmp.dir });
    await sender.put(samplePayload('after'));
    expect((await receiver.get()).requestId).toBe('after');
    missing.socket.destroy();
    await sender.close();
    await receiver.close();
    tmp.remove();
  });
});
