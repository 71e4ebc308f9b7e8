/**
 * A werift peer flooding its data channel (docs/webrtc.md, "Rate limits"). The flooder runs in its own process
 * (flood-peer.cjs) so that only the server's work lands on this event loop: 2,000 `stats` messages in one burst
 * are mostly dropped with at most one `rate_limited` error per second, the session keeps running, another session is
 * not disturbed, and `/health` keeps answering during the flood (its latency is printed; the bound asserted is
 * generous, the machine is shared).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { connectClient, startRtcServer, until, type RtcTestServer } from './helpers';

let server: RtcTestServer;
let child: ChildProcess | undefined;

beforeAll(async () => {
  server = await startRtcServer();
});

afterAll(async () => {
  child?.kill();
  await server.app.close();
});

/** Nearest-rank percentile of `values` (0–100). */
function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

type Reply = { event: string; [k: string]: unknown };

/** Sends `cmd` to the flooder and resolves with its next reply. */
function ask(p: ChildProcess, cmd: Record<string, unknown>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    p.once('message', (m: Reply) => (m.event === 'error' ? reject(new Error(String(m.message))) : resolve(m)));
    p.send(cmd);
  });
}

test('2,000 stats messages in a burst: rate_limited errors, the session and another one keep working, /health answers', async () => {
  child = fork(join(__dirname, 'flood-peer.cjs'), { stdio: 'inherit' });
  await ask(child, { cmd: 'connect', wsUrl: server.wsUrl, session: { prompt: 'a red ball', seed: 1, width: 32, height: 32 } });
  const other = await connectClient(server.wsUrl, { prompt: 'a blue room', seed: 2, width: 32, height: 32 });
  await other.channelInbox.next((m) => m.type === 'frame');

  // /health latency while the flood is handled: one request at a time, for as long as the flood lasts.
  const latencies: number[] = [];
  let flooding = true;
  const probe = (async () => {
    while (flooding || latencies.length < 10) {
      const t0 = performance.now();
      await (await fetch(`${server.origin}/health`)).text();
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const flooded = await ask(child, { cmd: 'flood', type: 'stats', count: 2000, markerId: 'after-flood' });
  flooding = false;
  await probe;
  const messages = flooded.messages as Array<Record<string, unknown>>;
  const floodMs = flooded.ms as number;
  const stats = messages.filter((m) => m.type === 'stats');
  const limited = messages.filter((m) => m.type === 'error' && m.code === 'rate_limited');
  console.log(
    `flood of 2000 stats: handled in ${floodMs.toFixed(0)} ms, ${stats.length} stats answered, ${limited.length} rate_limited errors; ` +
      `/health during it: n=${latencies.length} p50 ${percentile(latencies, 50).toFixed(1)} ms, p95 ${percentile(latencies, 95).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms`,
  );
  expect(limited.length).toBeGreaterThanOrEqual(1);
  expect(limited.length).toBeLessThanOrEqual(Math.ceil(floodMs / 1000) + 1);
  expect(limited[0]).toMatchObject({ fatal: false, limit: 'stats', param: 'type' });
  expect(String(limited[0]!.message)).toMatch(/stats/);
  // The bucket's burst plus its rate over the flood's duration (it reaches the server over many seconds).
  expect(stats.length).toBeLessThanOrEqual(10 + 5 * Math.ceil(floodMs / 1000) + 1);
  expect(stats.length).toBeLessThan(2000 / 4);
  expect(messages.some((m) => m.type === 'closed')).toBe(false);
  // Generous sanity bound: /health stays responsive.
  expect(percentile(latencies, 95)).toBeLessThan(500);

  // Both sessions keep working: the other's actions reach frames, the flooder's stats answer again once refilled.
  const otherFrom = other.channelInbox.all.length;
  await other.send({ type: 'action', key: 'up', id: 'o1' });
  await other.channelInbox.next((m) => m.type === 'frame' && m.action_id === 'o1', otherFrom);
  await new Promise((r) => setTimeout(r, 1100));
  const got = await ask(child, { cmd: 'send', message: { type: 'stats' }, until: 'stats' });
  expect((got.message as Record<string, unknown>).frames_sent).toBeGreaterThan(0);
  expect(other.channelInbox.all.some((m) => m.type === 'closed')).toBe(false);
  expect(server.engine.stats().sessions).toBe(2);

  await ask(child, { cmd: 'close' });
  other.ws.close();
  await until(() => server.engine.stats().sessions === 0);
  await other.pc.close();
});
