/**
 * The world demo in real headless Chromium (Debian chromium driven by playwright-core): `/demos/world` on a
 * listening server opens a WebRTC session over `/v1/rtc`, decodes the H.264 track, and a key press becomes an action
 * on the data channel whose id shows up in the metadata of frames the page displays.
 */
import type { Browser } from 'playwright-core';
import { launchChromium } from '../../helpers/chromium';
import { startRtcServer, until, type RtcTestServer } from './helpers';

let server: RtcTestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startRtcServer();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.app.close();
});

test('the world page decodes the session video and a key press yields displayed frames generated with that action', async () => {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  const res = await page.goto(`${server.origin}/demos/world?width=32&height=32`);
  expect(res?.status()).toBe(200);
  await page.click('#start-button');
  // Page-side expressions as strings: this project type-checks without the DOM library.
  await page.waitForFunction('window.omnirxWorld?.state === "running" && window.omnirxWorld.framesShown >= 5');
  await page.evaluate('document.activeElement.blur()');
  await page.keyboard.press('ArrowLeft');
  await page.waitForFunction('window.omnirxWorld.latencies.length >= 1');
  await page.keyboard.press('d');
  await page.waitForFunction('window.omnirxWorld.latencies.length >= 2');
  const state = (await page.evaluate(`(() => {
    const w = window.omnirxWorld;
    const v = document.getElementById('video');
    return { latencies: w.latencies, decoded: v.getVideoPlaybackQuality().totalVideoFrames, width: v.videoWidth, height: v.videoHeight, errors: w.errors, lastKey: w.lastFrame.key };
  })()`)) as { latencies: Array<{ id: string; key: string; ms: number }>; decoded: number; width: number; height: number; errors: unknown[]; lastKey: string };
  expect(state.latencies.map((l) => [l.id, l.key])).toEqual([
    ['a1', 'left'],
    ['a2', 'right'],
  ]);
  expect(state.latencies.every((l) => Number.isFinite(l.ms) && l.ms > 0)).toBe(true);
  expect(state.decoded).toBeGreaterThan(0);
  expect([state.width, state.height]).toEqual([32, 32]);
  expect(state.errors).toEqual([]);
  expect(state.lastKey).toBe('right');
  expect(problems).toEqual([]);
  await page.close();
  await until(() => server.engine.stats().sessions === 0);
});
