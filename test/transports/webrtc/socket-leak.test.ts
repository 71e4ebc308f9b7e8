/**
 * A served WebRTC session leaves no UDP socket bound once it ended (docs/webrtc.md, "Known issues"): werift 0.25.2
 * drops, unstopped, the per-m-line transports of an offer made under `max-compat` when the answer bundles them; the
 * server offers under `max-bundle` (transports/webrtc/peer-config.ts), so there is none to drop.
 */
import { connectClient, startRtcServer, until, type RtcTestServer } from './helpers';

let server: RtcTestServer;

beforeAll(async () => {
  server = await startRtcServer();
});

afterAll(async () => {
  await server.app.close();
});

/** UDP sockets open in this process (every ICE host candidate is one). */
function udpSockets(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'UDPWrap').length;
}

/** The open UDP sockets once they stopped changing for a moment (closing one takes an event-loop turn or two). */
async function settledUdpSockets(): Promise<number> {
  let last = udpSockets();
  for (let stable = 0; stable < 10;) {
    await new Promise((r) => setTimeout(r, 20));
    const now = udpSockets();
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

test('every UDP socket of a session is closed after it ended, whichever side ended it', async () => {
  const before = await settledUdpSockets();

  // Ended by the server when the signaling socket closes.
  const a = await connectClient(server.wsUrl, { prompt: 'a red ball', width: 32, height: 32 });
  await a.channelInbox.next((m) => m.type === 'frame');
  expect(udpSockets()).toBeGreaterThan(before);
  a.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await a.pc.close();
  expect(await settledUdpSockets()).toBe(before);

  // Ended by the client closing its peer connection.
  const b = await connectClient(server.wsUrl, { prompt: 'a blue room', width: 32, height: 32 });
  await b.channelInbox.next((m) => m.type === 'frame');
  await b.pc.close();
  await b.signaling.next((m) => m.type === 'closed');
  await until(() => server.engine.stats().sessions === 0);
  expect(await settledUdpSockets()).toBe(before);
});
