import * as net from 'node:net';
import { connectTcp } from '../../src/placement/connectors';
import { ControlLineReader, MAX_CONTROL_LINE_BYTES, parseControlLine, ReceiverMessageSchema } from '../../src/placement/connectors/control-messages';
import { until } from './connector-helpers';
import { samplePayload } from './payload-fixtures';

describe('control lines', () => {
  it('splits lines cut anywhere', () => {
    const reader = new ControlLineReader();
    expect(reader.push(Buffer.from('{"t":"ack"}\n{"t":"cre'))).toEqual(['{"t":"ack"}']);
    expect(reader.push(Buffer.from('dit","n":2}\n'))).toEqual(['{"t":"credit","n":2}']);
    expect(parseControlLine('{"t":"credit","n":2}', ReceiverMessageSchema)).toEqual({ t: 'credit', n: 2 });
  });

  it('refuses an over-long line before buffering more of it, whole or in pieces', () => {
    expect(() => new ControlLineReader().push(Buffer.alloc(MAX_CONTROL_LINE_BYTES + 1, 0x61))).toThrow(
      'control stream at byte 0: a line longer than 8192 bytes',
    );
    const reader = new ControlLineReader();
    reader.push(Buffer.from('{"t":"ack"}\n'));
    expect(() => reader.push(Buffer.concat([Buffer.alloc(MAX_CONTROL_LINE_BYTES + 1, 0x61), Buffer.from('\n')]))).toThrow(
      'control stream at byte 12: a line longer than 8192 bytes',
    );
  });

  it('names what is wrong with a line', () => {
    expect(() => parseControlLine('nope', ReceiverMessageSchema)).toThrow(/^control line is not JSON/);
    expect(() => parseControlLine('{"t":"credit","n":0}', ReceiverMessageSchema)).toThrow(/^control line: n: /);
    expect(() => parseControlLine('{"t":"shout"}', ReceiverMessageSchema)).toThrow(/^control line: t: /);
  });
});

describe('a sender facing a misbehaving receiver', () => {
  it('drops a connection that speaks garbage, fails what it carried and reconnects', async () => {
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      socket.write('{"t":"hello","version":1,"credits":1,"maxFrameBytes":1048576}\n');
      const first = connections === 1;
      socket.on('error', () => {});
      socket.once('data', () => socket.write(first ? 'HTTP/1.1 400 Bad Request\n' : '{"t":"ack"}\n'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as net.AddressInfo;
    const sender = connectTcp({ port, reconnectDelayMs: 1 });
    await sender.ready;
    await expect(sender.put(samplePayload('r1'))).rejects.toThrow(/link lost before the receiver accepted payload r1 \(control line is not JSON/);
    await until(() => sender.state === 'ready' && connections === 2);
    await sender.put(samplePayload('r2'));
    await sender.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});
