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
});
