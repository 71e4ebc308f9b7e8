/**
 * CORS (`createServer`'s `corsOrigins`, `omnirx serve --cors-origin`): off by default; with an allow-list, preflights
 * from an allowed origin are answered before auth and every answer to it carries `Access-Control-Allow-Origin`, while
 * any other origin gets no CORS header. In process through `app.inject()`; Chromium's view is in cors-browser.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { createApp } from './helpers';
import { createServer } from '../../../transports/server';
import { corsOriginProblem } from '../../../transports/shared/cors';
import { parseServeArgs } from '../../../src/cli/serve';

const APP = 'https://app.example.com';
const OTHER = 'https://evil.example.net';

/** The JSON routes a page would POST to, with a body each accepts. */
const POSTS = [
  { url: '/v1/videos', body: { prompt: 'a red ball', size: '64x64', num_frames: 1, num_inference_steps: 1 } },
  { url: '/v1/images/generations', body: { prompt: 'a red ball', size: '64x64', num_inference_steps: 1 } },
];

const preflight = (app: FastifyInstance, url: string, origin: string, method = 'POST') =>
  app.inject({
    method: 'OPTIONS',
    url,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
  });

const accessControlHeaders = (headers: Record<string, unknown>) => Object.keys(headers).filter((h) => h.startsWith('access-control-'));

describe('CORS off (the default)', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createApp();
  });
  afterAll(async () => {
    await app.close();
  });

  it('no response carries an Access-Control-* header, whatever the Origin; a preflight is 404 as any unknown method', async () => {
    for (const url of ['/health', '/v1/models', '/openapi.json']) {
      const res = await app.inject({ method: 'GET', url, headers: { origin: APP } });
      expect(res.statusCode).toBe(200);
      expect(accessControlHeaders(res.headers)).toEqual([]);
    }
    const res = await preflight(app, '/v1/videos', APP);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
    expect(accessControlHeaders(res.headers)).toEqual([]);
  });
});

describe('CORS with an allow-list and an api key', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await createApp({ corsOrigins: [APP, 'http://127.0.0.1:5173'], apiKey: 'k' });
  });
  afterAll(async () => {
    await app.close();
  });

  it.each(['/v1/videos', '/v1/images/generations', '/v1/videos/video_x', '/v1/models'])(
    'a preflight for %s from an allowed origin is 204 with the methods and headers, before auth',
    async (url) => {
      const res = await preflight(app, url, APP, url === '/v1/videos/video_x' ? 'DELETE' : 'POST');
      expect(res.statusCode).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe(APP);
      expect(String(res.headers['access-control-allow-methods']).split(/,\s*/)).toEqual(expect.arrayContaining(['GET', 'POST', 'DELETE']));
      expect(String(res.headers['access-control-allow-headers']).toLowerCase().split(/,\s*/)).toEqual(
        expect.arrayContaining(['authorization', 'content-type']),
      );
      expect(res.headers['access-control-max-age']).toBe('600');
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(String(res.headers.vary)).toMatch(/origin/i);
    },
  );

  it('a preflight from another origin, or with no Origin, gets no CORS header: 404 not_found, as without CORS', async () => {
    for (const res of [
      await preflight(app, '/v1/videos', OTHER),
      await preflight(app, '/v1/videos', 'https://app.example.com:8443'),
      await preflight(app, '/health', OTHER, 'GET'),
      await app.inject({ method: 'OPTIONS', url: '/v1/videos' }),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
      expect(accessControlHeaders(res.headers)).toEqual([]);
    }
  });

  it.each(POSTS)('POST $url from an allowed origin is answered with Access-Control-Allow-Origin', async ({ url, body }) => {
    const res = await app.inject({
      method: 'POST',
      url,
      headers: { origin: APP, authorization: 'Bearer k', 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    const other = await app.inject({
      method: 'POST',
      url,
      headers: { origin: OTHER, authorization: 'Bearer k', 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    // The server does not refuse the request itself (a browser does, by finding no Access-Control-Allow-Origin).
    expect(accessControlHeaders(other.headers)).toEqual([]);
  });

  it('errors to an allowed origin carry the header too, so the page can read them (401, 400, 404)', async () => {
    const cases = [
      { headers: { 'content-type': 'application/json' }, payload: '{"prompt":"x"}', status: 401, code: 'unauthorized' },
      { headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, payload: '{"prompt":"x","sizes":"1"}', status: 400, code: 'invalid_body' },
    ];
    for (const c of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/videos', headers: { origin: APP, ...c.headers }, payload: c.payload });
      expect({ status: res.statusCode, code: res.json().error.code, acao: res.headers['access-control-allow-origin'] }).toEqual({
        status: c.status,
        code: c.code,
        acao: APP,
      });
    }
    const missing = await app.inject({ method: 'GET', url: '/v1/videos/video_nope', headers: { origin: APP, authorization: 'Bearer k' } });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['access-control-allow-origin']).toBe(APP);
    // The request id is exposed to the page, so it can quote it.
    expect(missing.headers['access-control-expose-headers']).toBe('X-Request-Id');
    expect(missing.headers['x-request-id']).toEqual(expect.any(String));
  });

  it("a job's SSE stream (a hijacked reply) carries the header too", async () => {
    const headers = { origin: APP, authorization: 'Bearer k' };
    const job = await app.inject({
      method: 'POST',
      url: '/v1/videos',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: JSON.stringify(POSTS[0]!.body),
    });
    const events = await app.inject({ method: 'GET', url: `/v1/videos/${job.json().id}/events`, headers });
    expect(events.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(events.headers['access-control-allow-origin']).toBe(APP);
    expect(events.body).toMatch(/event: final/);
  });
});

describe('CORS configuration', () => {
  it('corsOriginProblem accepts exact origins only', () => {
    for (const ok of ['https://app.example.com', 'http://127.0.0.1:5173', 'http://localhost:8080', 'https://[::1]:8443'])
      expect(corsOriginProblem(ok)).toBeUndefined();
    for (const bad of [
      '*',
      'https://app.example.com/',
      'https://app.example.com/x',
      'https://App.example.com',
      'https://a.com:443',
      'app.example.com',
      'ftp://a.com',
      'null',
      '',
      'https://u:p@a.com',
      7,
    ])
      expect({ bad, problem: corsOriginProblem(bad) }).toEqual({ bad, problem: expect.any(String) });
    expect(corsOriginProblem('https://app.example.com/')).toMatch(/write "https:\/\/app\.example\.com"/);
    expect(corsOriginProblem('*')).toMatch(/wildcard/);
  });

  it('createServer refuses a bad corsOrigins with OMNIRX_ERR_CONFIG naming corsOrigins', async () => {
    for (const corsOrigins of [
      ['*'],
      ['https://ok.example', 'https://x.example/path'],
      'https://a.example' as unknown as string[],
      [null as unknown as string],
    ]) {
      await expect(createServer({ families: [], corsOrigins })).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'corsOrigins' });
    }
    await expect(createServer({ families: [], corsOrigins: ['https://ok.example', 'https://x.example/path'] })).rejects.toThrow(/corsOrigins\[1\]/);
  });

  it('omnirx serve --cors-origin is repeatable and checked, naming the flag', () => {
    expect(parseServeArgs([], {}, () => undefined)).not.toHaveProperty('corsOrigins');
    expect(parseServeArgs(['--cors-origin', APP, '--cors-origin', 'http://127.0.0.1:5173'], {}, () => undefined)).toMatchObject({
      corsOrigins: [APP, 'http://127.0.0.1:5173'],
    });
    expect(() => parseServeArgs(['--cors-origin', '*'], {}, () => undefined)).toThrow(/--cors-origin .*wildcard/);
    expect(() => parseServeArgs(['--cors-origin', 'https://a.example/'], {}, () => undefined)).toThrow(
      expect.objectContaining({ code: 'OMNIRX_ERR_CLI_ARGUMENT' }),
    );
  });
});
