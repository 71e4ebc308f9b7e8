/**
 * CORS and the API docs in real headless Chromium (Debian chromium driven by playwright-core). Two tiny page servers
 * on other ports stand for other origins: the omnirx server allows one of them (`corsOrigins`) and requires a bearer
 * token, so the page's POSTs are preflighted. From the allowed origin `fetch` POSTs and reads the answers (errors
 * included); from the other the browser refuses the answer (`TypeError: Failed to fetch`). The docs page loads with no
 * console error, fetches nothing besides itself, and shows every route of /openapi.json.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../../helpers/chromium';
import { startServer, type TestServer } from './helpers';

/** A server answering every GET with an empty page: another origin to run `fetch` from. */
async function pageServer(): Promise<{ server: Server; origin: string }> {
  const server = createHttpServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><html><head><title>other origin</title></head><body></body></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface FetchResult {
  status?: number;
  body?: Record<string, any>;
  error?: string;
}

/** Runs `fetch(url, init)` in the page (as its origin) and returns the status and JSON body, or the error thrown. */
function fetchIn(page: Page, url: string, init: { method: string; headers?: Record<string, string>; body?: string }): Promise<FetchResult> {
  // Page-side code as a string: this project type-checks without the DOM library.
  return page.evaluate(`(async () => {
    try {
      const res = await fetch(${JSON.stringify(url)}, ${JSON.stringify(init)});
      return { status: res.status, body: await res.json() };
    } catch (e) {
      return { error: String(e) };
    }
  })()`) as Promise<FetchResult>;
}

const TOKEN = 'browser-token';
const json = (body: unknown, token = true) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${TOKEN}` } : {}) },
  body: JSON.stringify(body),
});
const IMAGE = { prompt: 'a red ball in a dark blue room', size: '64x64', num_inference_steps: 1 };
const VIDEO = { prompt: 'a red ball in a dark blue room', size: '64x64', num_frames: 1, num_inference_steps: 1 };

let allowed: { server: Server; origin: string };
let refused: { server: Server; origin: string };
let omnirx: TestServer;
let browser: Browser;

beforeAll(async () => {
  allowed = await pageServer();
  refused = await pageServer();
  omnirx = await startServer({ apiKey: TOKEN, corsOrigins: [allowed.origin] });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await omnirx?.app.close();
  for (const s of [allowed, refused]) await new Promise((resolve) => s?.server.close(resolve));
});

describe('CORS in headless Chromium', () => {
  it('a page on an allowed origin POSTs (preflighted: JSON body and bearer token) and reads the answers, errors included', async () => {
    const page = await browser.newPage();
    await page.goto(allowed.origin);
    const image = await fetchIn(page, `${omnirx.origin}/v1/images/generations`, json(IMAGE));
    expect(image.error).toBeUndefined();
    expect(image.status).toBe(200);
    expect(image.body!.data[0].b64_json).toMatch(/^iVBORw0KGgo/); // a PNG
    const video = await fetchIn(page, `${omnirx.origin}/v1/videos`, json(VIDEO));
    expect(video).toMatchObject({ status: 200, body: { object: 'video', id: expect.stringMatching(/^video_/) } });
    const job = await fetchIn(page, `${omnirx.origin}/v1/videos/${video.body!.id}`, { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(job).toMatchObject({ status: 200, body: { id: video.body!.id } });
    const deleted = await fetchIn(page, `${omnirx.origin}/v1/videos/${video.body!.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(deleted).toMatchObject({ status: 200, body: { deleted: true } });
    const noToken = await fetchIn(page, `${omnirx.origin}/v1/videos`, json(VIDEO, false));
    expect(noToken).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    const bad = await fetchIn(page, `${omnirx.origin}/v1/videos`, json({ ...VIDEO, sizes: '1' }));
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_body', param: 'sizes' } } });
    await page.close();
  });

  it('a page on an origin not allowed cannot: the browser refuses the answer (TypeError: Failed to fetch)', async () => {
    const page = await browser.newPage();
    await page.goto(refused.origin);
    for (const r of [
      await fetchIn(page, `${omnirx.origin}/v1/images/generations`, json(IMAGE)),
      await fetchIn(page, `${omnirx.origin}/v1/videos`, json(VIDEO)),
      // a simple request (no preflight) reaches the server, but the page cannot read the answer
      await fetchIn(page, `${omnirx.origin}/health`, { method: 'GET' }),
    ])
      expect(r).toEqual({ error: 'TypeError: Failed to fetch' });
    await page.close();
  });
});

describe('the docs page in headless Chromium', () => {
  it('loads with no console error, fetches nothing else, and shows every route of /openapi.json', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()}`));
    page.on('request', (r) => requests.push(r.url()));
    const res = await page.goto(`${omnirx.origin}/docs`);
    expect(res?.status()).toBe(200);
    await page.waitForLoadState('load');
    expect(await page.title()).toMatch(/^omnirx .* API$/);
    const doc = (await (await fetch(`${omnirx.origin}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const shown = (await page.evaluate(
      `[...document.querySelectorAll('section.op h3')].map((h) => h.querySelector('.method').textContent + ' ' + h.querySelector('.path').textContent)`,
    )) as string[];
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`));
    expect(shown.sort()).toEqual(documented.sort());
    expect(shown).toEqual(expect.arrayContaining(['POST /v1/videos', 'POST /v1/images/generations', 'GET /openapi.json', 'GET /v1/stream']));
    // the index links to each operation, the schemas are there, and the bearer scheme is shown
    expect(await page.locator('ul.index li').count()).toBe(documented.length);
    expect(await page.locator('#schema-VideoCreateBody table tr').count()).toBeGreaterThan(10);
    expect(await page.locator('.lock-note').isVisible()).toBe(true);
    // following a link stays on the page
    await page.click('ul.index a[href="#op-post-v1-videos"]');
    expect(page.url()).toBe(`${omnirx.origin}/docs#op-post-v1-videos`);
    expect(requests).toEqual([`${omnirx.origin}/docs`]);
    expect(problems).toEqual([]);
    await page.close();
  });
});
