/**
 * WebRTC over a TURN relay only (docs/webrtc.md, "ICE servers and NAT"): the test starts Debian's coturn on
 * 127.0.0.1 with a static long-term user, configures the server's deploy config `webrtc` section with it and
 * `iceTransportPolicy: "relay"`, and the world page in headless Chromium opens a session: the offer carries the ICE
 * servers and policy to the page, frames decode, and Chromium's selected candidate pair is relayed on its side.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { Engine } from '../../../src/engine/engine';
import { builtinFamilies } from '../../../src/families';
import { parseDeployConfig } from '../../../src/placement/deploy-config';
import { createServer } from '../../../transports/server';
import { launchChromium } from '../../helpers/chromium';
import { makeModelsDir, tinyWorldSpec } from '../../helpers/tiny-model';
import { until } from './helpers';

const TURNSERVER = process.env.OMNIRX_TURNSERVER ?? 'turnserver';

let turn: ChildProcess | undefined;
let turnDir: string | undefined;
let app: FastifyInstance | undefined;
let engine: Engine;
let browser: Browser | undefined;
let origin: string;
let turnPort: number;

/** A free TCP port on 127.0.0.1 (coturn listens on UDP and TCP at the same port). */
async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

beforeAll(async () => {
  if (spawnSync(TURNSERVER, ['--help']).error !== undefined) throw new Error(`${TURNSERVER} not found: apt-get install -y coturn`);
  turnPort = await freePort();
  turnDir = mkdtempSync(join(tmpdir(), 'omnirx-turn-'));
  // prettier-ignore
  turn = spawn(TURNSERVER, [
    '-n', '--listening-ip', '127.0.0.1', '--relay-ip', '127.0.0.1', '--listening-port', String(turnPort),
    '--lt-cred-mech', '--user', 'omnirx:turn-secret', '--realm', 'omnirx', '--no-tls', '--no-dtls', '--no-cli',
    '--allow-loopback-peers', '--min-port', '49152', '--max-port', '65535', '--pidfile', join(turnDir, 'turn.pid'),
    '--userdb', join(turnDir, 'turndb'), '--log-file', 'stdout', '--simple-log', '--no-stun-backward-compatibility',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  turn.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  turn.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const started = Date.now();
  await until(() => /listener opened on|Total General servers/i.test(log) || turn!.exitCode !== null || Date.now() - started > 10_000);
  if (turn.exitCode !== null) throw new Error(`turnserver exited: ${log.slice(-2000)}`);

  const modelsDir = await makeModelsDir([{ spec: tinyWorldSpec(), seed: 3 }]);
  engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 2, steps: 2, maxSessions: 2 },
  });
  const deploy = parseDeployConfig({
    schemaVersion: 1,
    webrtc: {
      iceServers: [{ urls: `turn:127.0.0.1:${turnPort}?transport=udp`, username: 'omnirx', credential: 'turn-secret' }],
      iceTransportPolicy: 'relay',
    },
  });
  app = await createServer({ engine, deploy });
  await app.omnirx.engineReady;
  await app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
  turn?.kill('SIGTERM');
  if (turnDir !== undefined) rmSync(turnDir, { recursive: true, force: true });
});

test('a world session over a TURN relay only: the page gets the ICE servers, frames decode, the selected pair is relayed', async () => {
  const page = await browser!.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(`${origin}/demos/world?width=32&height=32`);
  await page.click('#start-button');
  await page.waitForFunction('window.omnirxWorld?.state === "running" && window.omnirxWorld.framesShown >= 5', undefined, { timeout: 60_000 });
  // Page-side expressions as strings: this project type-checks without the DOM library.
  const state = (await page.evaluate(`(async () => {
    const w = window.omnirxWorld;
    const cfg = w.pc.getConfiguration();
    const stats = [...(await w.pc.getStats()).values()];
    const transport = stats.find((s) => s.type === 'transport');
    const pair = stats.find((s) => s.type === 'candidate-pair' && s.id === transport?.selectedCandidatePairId)
      ?? stats.find((s) => s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded');
    const local = stats.find((s) => s.id === pair?.localCandidateId);
    const remote = stats.find((s) => s.id === pair?.remoteCandidateId);
    const v = document.getElementById('video');
    return {
      policy: cfg.iceTransportPolicy,
      servers: cfg.iceServers.map((s) => [].concat(s.urls)),
      local: local?.candidateType,
      remote: remote?.candidateType,
      localTypes: [...new Set(stats.filter((s) => s.type === 'local-candidate').map((s) => s.candidateType))],
      decoded: v.getVideoPlaybackQuality().totalVideoFrames,
      width: v.videoWidth,
      errors: w.errors,
    };
  })()`)) as { policy: string; servers: string[][]; local?: string; remote?: string; localTypes: string[]; decoded: number; width: number; errors: unknown[] };
  expect(state.policy).toBe('relay');
  expect(state.servers).toEqual([[`turn:127.0.0.1:${turnPort}?transport=udp`]]);
  expect(state.localTypes).toEqual(['relay']);
  expect(state.local).toBe('relay');
  // The server relays only too, so its side of the pair is a relayed candidate as well.
  expect(state.remote).toBe('relay');
  expect(state.decoded).toBeGreaterThan(0);
  expect(state.width).toBe(32);
  expect(state.errors).toEqual([]);
  expect(problems).toEqual([]);
  await page.close();
  await until(() => engine.stats().sessions === 0);
});
