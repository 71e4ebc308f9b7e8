import WebSocket from 'ws';
import { startRtcServer, connectClient, until, type RtcTestServer } from './helpers';

let server: RtcTestServer;

beforeAll(async () => {
  server = await startRtcServer();
});

afterAll(async () => {
  await server.app.close();
});

test('offer/answer: frames arrive on the track with one frame message each, and an action id shows on later frames', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a red ball', seed: 7, width: 32, height: 32 });
  const offer = await c.signaling.next((m) => m.type === 'offer');
  expect(typeof offer.sdp).toBe('string');
  expect(offer.sdp as string).toContain('H264');
  expect(offer.sdp as string).not.toMatch(/stun:/);
  await c.channel;
  const ready = await c.channelInbox.next((m) => m.type === 'ready');
  expect(ready).toMatchObject({ width: 32, height: 32, fps: 20, chunk_frames: 1, rtp_clock_rate: 90000 });
  await until(() => c.rtpFrames.length >= 3);
  const frames = () => c.channelInbox.all.filter((m) => m.type === 'frame');
  // Every frame message names an RTP timestamp that arrived on the track (metadata ↔ picture).
  const firstFrames = frames().slice(0, 3);
  expect(firstFrames.map((f) => f.pts)).toEqual([0, 1, 2]);
  await until(() => firstFrames.every((f) => c.rtpFrames.includes(f.rtp as number)));

  await c.send({ type: 'action', key: 'left', id: 'a1' });
  const tagged = await c.channelInbox.next((m) => m.type === 'frame' && m.action_id === 'a1');
  expect(tagged.key).toBe('left');
  const before = frames().filter((f) => (f.pts as number) < (tagged.pts as number));
  expect(before.every((f) => f.action_id === undefined)).toBe(true);
  await until(() => c.rtpFrames.includes(tagged.rtp as number));

  c.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});

test('data-channel garbage, unknown types, oversized messages and bad actions get errors naming the field; the session keeps running', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a blue room', seed: 1, width: 32, height: 32 });
  const dc = await c.channel;
  await c.channelInbox.next((m) => m.type === 'frame');
  const errors = () => c.channelInbox.all.filter((m) => m.type === 'error');
  dc.send(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00, 0xff]));
  dc.send('{"type": "action", "key": ');
  dc.send(JSON.stringify({ type: 'teleport' }));
  dc.send(JSON.stringify({ type: 'action', key: 'sideways', id: 'bad1' }));
  dc.send(JSON.stringify({ type: 'action', key: 'up', vector: [1, 2, 3] }));
  dc.send(JSON.stringify({ type: 'action', key: 'up', id: '' }));
  dc.send(JSON.stringify({ type: 'flush', extra: 1 }));
  dc.send(JSON.stringify({ type: 'action', key: 'up', pad: 'x'.repeat(20_000) }));
  await until(() => errors().length >= 8);
  expect(errors().map((e) => [e.code, e.param])).toEqual([
    ['invalid_json', 'message'],
    ['invalid_json', 'message'],
    ['invalid_message', 'type'],
    ['OMNIRX_ERR_INVALID_REQUEST', 'key'],
    ['OMNIRX_ERR_INVALID_REQUEST', 'vector'],
    ['OMNIRX_ERR_INVALID_REQUEST', 'id'],
    ['invalid_message', 'extra'],
    ['message_too_large', 'message'],
  ]);
  for (const e of errors()) expect(typeof e.message).toBe('string');
  // Still running: a valid action reaches later frames, stats answer.
  const from = c.channelInbox.all.length;
  await c.send({ type: 'action', key: 'down', vector: [0.5, -0.5], id: 'ok1' });
  const tagged = await c.channelInbox.next((m) => m.type === 'frame' && m.action_id === 'ok1', from);
  expect(tagged.key).toBe('down');
  await c.send({ type: 'stats' });
  const stats = await c.channelInbox.next((m) => m.type === 'stats');
  expect(stats.frames_sent as number).toBeGreaterThan(0);
  expect(stats.frames_in_flight as number).toBeLessThanOrEqual(2);
  expect(stats.flushes as number).toBeGreaterThanOrEqual(0);
  expect(c.channelInbox.all.some((m) => m.type === 'closed')).toBe(false);
  await c.send({ type: 'close' });
  const closed = await c.signaling.next((m) => m.type === 'closed');
  expect(closed.reason).toBe('client_closed');
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});

test('signaling garbage and bad session fields get errors naming the field; the socket can still start a session', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a room', width: 30, height: 32 });
  const bad = await c.signaling.next((m) => m.type === 'error');
  expect(bad).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' });
  expect(String(bad.param)).toMatch(/^session\.width/);
  c.ws.send(Buffer.from([1, 2, 3, 4]), { binary: true });
  c.ws.send('not json');
  c.ws.send(JSON.stringify({ type: 'dance' }));
  c.ws.send(JSON.stringify({ type: 'answer', sdp: 'v=0' }));
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: 5 } }));
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: ' \t ' } }));
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: 'a', fps: 0 } }));
  await until(() => c.signaling.all.filter((m) => m.type === 'error').length >= 8);
  expect(
    c.signaling.all
      .filter((m) => m.type === 'error')
      .slice(1)
      .map((e) => [e.code, e.param]),
  ).toEqual([
    ['invalid_json', 'message'],
    ['invalid_json', 'message'],
    ['invalid_message', 'type'],
    ['invalid_message', 'type'],
    ['invalid_message', 'session.prompt'],
    ['invalid_message', 'session.prompt'],
    ['OMNIRX_ERR_INVALID_REQUEST', 'session.fps'],
  ]);
  // η: the message schema takes a number, the engine its range.
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: 'a', eta: 2 } }));
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: 'a', eta: 'some' } }));
  await until(() => c.signaling.all.filter((m) => m.type === 'error').length >= 10);
  const etaErrors = c.signaling.all
    .filter((m) => m.type === 'error')
    .slice(8)
    .map((e) => `${e.code} ${e.param}`);
  expect(etaErrors.sort()).toEqual(['OMNIRX_ERR_INVALID_REQUEST session.eta', 'invalid_message session.eta']);
  expect(server.engine.stats().sessions).toBe(0);
  c.ws.send(JSON.stringify({ type: 'start', session: { prompt: 'a red room', width: 32, height: 32 } }));
  await c.channelInbox.next((m) => m.type === 'frame');
  c.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});

test('the session is freed when the peer connection closes (signaling socket left open)', async () => {
  const c = await connectClient(server.wsUrl, { prompt: 'a ball', width: 32, height: 32 });
  await c.channelInbox.next((m) => m.type === 'frame');
  expect(server.engine.stats().sessions).toBe(1);
  await c.pc.close();
  const closed = await c.signaling.next((m) => m.type === 'closed');
  expect(['channel_closed', 'peer_closed', 'peer_failed']).toContain(closed.reason);
  await until(() => server.engine.stats().sessions === 0);
});

test('100 rapid signaling connects and disconnects leave no session behind, and the server still serves', async () => {
  for (let i = 0; i < 100; i++) {
    const ws = new WebSocket(server.wsUrl);
    await new Promise<void>((resolve) => ws.once('open', () => resolve()));
    if (i % 2 === 0) ws.send(JSON.stringify({ type: 'start', session: { prompt: 'a room', width: 32, height: 32 } }));
    if (i % 4 === 0) await new Promise((r) => setImmediate(r));
    ws.close();
  }
  await until(() => server.engine.stats().sessions === 0);
  const c = await connectClient(server.wsUrl, { prompt: 'a room', width: 32, height: 32 });
  await c.channelInbox.next((m) => m.type === 'frame');
  c.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await c.pc.close();
});
