/**
 * Signaling on `/v1/rtc` refuses a bad candidate or answer naming the field and leaves the session usable, sends
 * `closed` before it closes the socket, and shapes errors as `/v1/stream` does (docs/webrtc.md, "Signaling").
 */
import { RTCPeerConnection, type RTCDataChannel } from 'werift';
import WebSocket from 'ws';
import { OmniError } from '../../../src/errors';
import { rtcPeerConfig } from '../../../transports/webrtc/peer-config';
import { RtcSession } from '../../../transports/webrtc/rtc-session';
import { connectClient, Inbox, startRtcServer, until, type RtcTestServer } from './helpers';

let server: RtcTestServer;

beforeAll(async () => {
  server = await startRtcServer();
});

afterAll(async () => {
  await server.app.close();
});

/** A well-formed host candidate (RFC 8839) nobody listens on. */
const HOST_CANDIDATE = 'candidate:1 1 udp 2130706431 127.0.0.1 9 typ host';

function midsOf(sdp: string): string[] {
  return [...sdp.matchAll(/^a=mid:(\S+)/gm)].map((m) => m[1]!);
}

test('malformed ICE candidates are refused on receipt naming the field; the answer is unaffected and connects', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a red ball', width: 32, height: 32 }, { autoAnswer: false });
  const offer = await c.signaling.next((m) => m.type === 'offer');
  const mid = midsOf(offer.sdp as string)[0]!;
  const errors = () => c.signaling.all.filter((m) => m.type === 'error');
  const sendCandidate = (id: string, candidate: Record<string, unknown>) => c.ws.send(JSON.stringify({ type: 'candidate', id, candidate }));
  sendCandidate('c1', { candidate: 'garbage', sdpMid: mid });
  sendCandidate('c2', { candidate: HOST_CANDIDATE });
  sendCandidate('c3', { candidate: HOST_CANDIDATE, sdpMid: 'nope' });
  sendCandidate('c4', { candidate: HOST_CANDIDATE, sdpMLineIndex: 7 });
  sendCandidate('c5', { candidate: 'candidate:1 1 udp 2130706431 127.0.0.1 70000 typ host', sdpMid: mid });
  sendCandidate('c6', { candidate: 'candidate:1 1 udp 2130706431 127.0.0.1 9 typ host raddr', sdpMLineIndex: 0 });
  // Well-formed: queued until the answer, then applied without a word.
  sendCandidate('ok1', { candidate: HOST_CANDIDATE, sdpMid: mid });
  sendCandidate('ok2', { candidate: '' });
  await until(() => errors().length >= 6);
  // Shape errors answer at once, section errors after a look at the offer: compare in message order.
  const byId = (a: Record<string, unknown>, b: Record<string, unknown>) => String(a.replyTo).localeCompare(String(b.replyTo));
  expect(
    errors()
      .sort(byId)
      .map((e) => [e.replyTo, e.code, e.param, e.fatal]),
  ).toEqual([
    ['c1', 'invalid_message', 'candidate.candidate', false],
    ['c2', 'invalid_message', 'candidate.sdpMid', false],
    ['c3', 'OMNIRX_ERR_INVALID_REQUEST', 'candidate.sdpMid', false],
    ['c4', 'OMNIRX_ERR_INVALID_REQUEST', 'candidate.sdpMLineIndex', false],
    ['c5', 'invalid_message', 'candidate.candidate', false],
    ['c6', 'invalid_message', 'candidate.candidate', false],
  ]);
  expect(errors().find((e) => e.replyTo === 'c3')!.message).toContain('"nope"');

  c.ws.send(JSON.stringify({ type: 'answer', id: 'a1', sdp: await c.answer() }));
  await c.channel;
  await c.channelInbox.next((m) => m.type === 'frame');
  expect(errors()).toHaveLength(6);
  c.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});

test('a candidate queued before the answer and refused when applied rejects under `candidate`; the answer still connects', async () => {
  const session = await RtcSession.open(server.engine, { prompt: 'a blue room', width: 32, height: 32 });
  const client = new RTCPeerConnection(rtcPeerConfig());
  try {
    // Before the offer the server cannot check the mid: the candidate waits for the answer.
    const queued = session.addCandidate({ candidate: HOST_CANDIDATE, sdpMid: 'not-a-mid' });
    const settled = queued.then(
      () => 'applied',
      (err: unknown) => err,
    );
    const inbox = new Inbox();
    const channel = new Promise<RTCDataChannel>((resolve) =>
      client.onDataChannel.subscribe((dc) => {
        dc.onMessage.subscribe((d) => inbox.push(JSON.parse(d.toString()) as Record<string, unknown>));
        if (dc.readyState === 'open') resolve(dc);
        else dc.stateChanged.subscribe((s) => s === 'open' && resolve(dc));
      }),
    );
    await client.setRemoteDescription({ type: 'offer', sdp: await session.createOffer() });
    await client.setLocalDescription(await client.createAnswer());
    await session.acceptAnswer(client.localDescription!.sdp);
    const err = await settled;
    expect(err).toBeInstanceOf(OmniError);
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'candidate' });
    expect((err as Error).message).toMatch(/^candidate: /);
    await channel;
    await inbox.next((m) => m.type === 'ready');
  } finally {
    session.close('client_closed');
    await client.close();
  }
  await until(() => server.engine.stats().sessions === 0);
});

test('a malformed answer is refused naming `sdp`; the socket and session stay usable and a correct answer connects', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a green hill', width: 32, height: 32 }, { autoAnswer: false });
  const offer = (await c.signaling.next((m) => m.type === 'offer')) as { sdp: string };
  const good = await c.answer();
  const errors = () => c.signaling.all.filter((m) => m.type === 'error');
  c.ws.send(JSON.stringify({ type: 'answer', id: 'a1', sdp: 'garbage sdp' }));
  // Well-formed SDP without the ICE credentials.
  c.ws.send(JSON.stringify({ type: 'answer', id: 'a2', sdp: good.replace(/^a=ice-(ufrag|pwd):.*\r?\n/gm, '') }));
  // One media section fewer than the offer.
  const firstSection = good.slice(0, good.indexOf('\nm=', good.indexOf('\nm=') + 1) + 1);
  c.ws.send(JSON.stringify({ type: 'answer', id: 'a3', sdp: firstSection }));
  // The server's own offer sent back (well-formed, every section, credentials): werift would take it and the session
  // would never connect.
  c.ws.send(JSON.stringify({ type: 'answer', id: 'a3b', sdp: offer.sdp }));
  await until(() => errors().length >= 4);
  expect(errors().map((e) => [e.replyTo, e.code, e.param, e.fatal])).toEqual([
    ['a1', 'OMNIRX_ERR_INVALID_REQUEST', 'sdp', false],
    ['a2', 'OMNIRX_ERR_INVALID_REQUEST', 'sdp', false],
    ['a3', 'OMNIRX_ERR_INVALID_REQUEST', 'sdp', false],
    ['a3b', 'OMNIRX_ERR_INVALID_REQUEST', 'sdp', false],
  ]);
  expect(errors()[1]!.message).toMatch(/ice-ufrag/);
  expect(errors()[2]!.message).toMatch(/media section/);
  expect(errors()[3]!.message).toMatch(/offer sent back/);
  expect(c.signaling.all.some((m) => m.type === 'closed')).toBe(false);

  c.ws.send(JSON.stringify({ type: 'answer', id: 'a4', sdp: good }));
  await c.channel;
  await c.channelInbox.next((m) => m.type === 'frame');
  // A second answer is refused; the session keeps running.
  c.ws.send(JSON.stringify({ type: 'answer', id: 'a5', sdp: good }));
  await until(() => errors().length >= 5);
  expect(errors()[4]).toMatchObject({ replyTo: 'a5', param: 'sdp', fatal: false });
  const from = c.channelInbox.all.length;
  await c.channelInbox.next((m) => m.type === 'frame', from);
  expect(c.signaling.all.some((m) => m.type === 'closed')).toBe(false);
  c.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});

test('`close` on the signaling socket sends `closed` (client_closed) before the close frame', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a ball', width: 32, height: 32 });
  await c.channelInbox.next((m) => m.type === 'frame');
  c.ws.send(JSON.stringify({ type: 'close' }));
  const frame = await c.closeFrame;
  expect(frame.code).toBe(1000);
  const before = c.signaling.all.slice(0, frame.after);
  expect(before.filter((m) => m.type === 'closed')).toEqual([{ type: 'closed', reason: 'client_closed' }]);
  expect(before.at(-1)).toEqual({ type: 'closed', reason: 'client_closed' });
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();

  // Without a session: still `closed`, then the close frame.
  const ws = new WebSocket(server.wsUrl);
  const got: unknown[] = [];
  ws.on('message', (d) => got.push(JSON.parse(d.toString())));
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  ws.send(JSON.stringify({ type: 'close' }));
  const code = await new Promise<number>((resolve) => ws.once('close', (cd) => resolve(cd)));
  expect(code).toBe(1000);
  expect(got).toEqual([{ type: 'closed', reason: 'client_closed' }]);
});

test('signaling errors carry `fatal` and `replyTo` as on /v1/stream; a message that is not an object has param null', async () => {
  const ws = new WebSocket(server.wsUrl);
  const inbox = new Inbox();
  ws.on('message', (d) => inbox.push(JSON.parse(d.toString()) as Record<string, unknown>));
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  ws.send('[1, 2]');
  ws.send('"start"');
  ws.send(JSON.stringify({ type: 'dance', id: 'd1' }));
  ws.send(JSON.stringify({ type: 'answer', id: 'early', sdp: 'v=0' }));
  ws.send(JSON.stringify({ type: 'close', id: 'x'.repeat(65) }));
  await until(() => inbox.all.length >= 5);
  expect(inbox.all.map((e) => [e.code, e.param, e.fatal, e.replyTo])).toEqual([
    ['invalid_message', null, false, null],
    ['invalid_message', null, false, null],
    ['invalid_message', 'type', false, 'd1'],
    ['invalid_message', 'type', false, 'early'],
    ['invalid_message', 'id', false, null],
  ]);
  ws.close();
});
