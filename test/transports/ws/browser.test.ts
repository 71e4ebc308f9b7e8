/**
 * The generation demo in real headless Chromium (Debian chromium driven by playwright-core): the page at
 * `/demos/generate`, served by a listening server on 127.0.0.1, streams a generation over `/v1/stream` and plays
 * the fMP4 fragments through Media Source Extensions — the video element's time advances and frames are decoded.
 */
import type { Browser } from 'playwright-core';
import { launchChromium } from '../../helpers/chromium';
import { startServer, type TestServer } from '../http/helpers';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startServer({ apiKey: 'demo-token' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.app.close();
});

describe('generation demo page in headless Chromium', () => {
  it('plays the fMP4 stream through MSE: currentTime advances and frames are decoded', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    const res = await page.goto(`${server.origin}/demos/generate?token=demo-token`);
    expect(res?.status()).toBe(200);
    await page.fill('#size', '64x64');
    await page.fill('#num_frames', '9');
    await page.fill('#fps', '8');
    await page.fill('#num_inference_steps', '2');
    await page.click('#go');
    // Page-side expressions as strings: this project type-checks without the DOM library.
    await page.waitForFunction('window.omnirxDemo?.ended === true');
    await page.waitForFunction(
      "(() => { const v = document.querySelector('video'); return v.currentTime > 0.5 && v.getVideoPlaybackQuality().totalVideoFrames > 0; })()",
    );
    const state = (await page.evaluate(`(() => {
      const v = document.querySelector('video');
      const demo = window.omnirxDemo;
      return { frames: demo.frames, appended: demo.appended, decoded: v.getVideoPlaybackQuality().totalVideoFrames, width: v.videoWidth, height: v.videoHeight,
        progress: document.getElementById('progress').value, status: document.getElementById('status').textContent };
    })()`)) as { frames: number; appended: number; decoded: number; width: number; height: number; progress: number; status: string };
    expect(state).toMatchObject({ frames: 9, appended: 9, width: 64, height: 64, progress: 2 });
    expect(state.decoded).toBeGreaterThan(0);
    expect(state.status).toMatch(/done: 9 frames/);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('serves demos/*.html|*.js only: traversal and unknown names are 404', async () => {
    for (const p of ['/demos/generate.js', '/demos/generate.html']) expect((await fetch(server.origin + p)).status).toBe(200);
    expect((await fetch(`${server.origin}/demos/generate.js`)).headers.get('content-type')).toMatch(/^text\/javascript/);
    for (const p of ['/demos/..%2Fpackage.json', '/demos/%2e%2e%2fpackage', '/demos/nope', '/demos/Generate', '/demos/generate.ts', '/demos/../package.json']) {
      expect({ p, status: (await fetch(server.origin + p)).status }).toEqual({ p, status: 404 });
    }
  });
});
