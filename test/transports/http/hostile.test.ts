/**
 * Hostile input against one server. What an HTTP response shows goes through `app.inject()`; what only a socket can
 * carry (bytes Node's HTTP parser refuses, upgrades, CONNECT, connections dropped half-way) goes over a real one.
 */
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createApp, listen, type TestServer } from './helpers';

const KEY = 'k-hostile';
let app: FastifyInstance;

beforeAll(async () => {
  app = await createApp({ apiKey: KEY, bodyLimitBytes: 4096, maxUploadBytes: 1024 });
});

afterAll(async () => {
  await app.close();
});

const auth = { authorization: `Bearer ${KEY}` };

async function get(url: string, headers: Record<string, string> = auth): Promise<{ status: number; json: Record<string, any> }> {
  const res = await app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, json: res.json() as Record<string, any> };
}

async function post(
  pathname: string,
  body: string | FormData,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<{ status: number; json: Record<string, any> }> {
  // A string goes as a Buffer so that an empty body is sent as one (Content-Length: 0), as fetch sends it.
  const res = await app.inject({
    method: 'POST',
    url: pathname,
    payload: typeof body === 'string' ? Buffer.from(body) : body,
    headers: { ...auth, ...headers },
  });
  return { status: res.statusCode, json: res.json() as Record<string, any> };
}

const postJson = (body: unknown) => post('/v1/videos', JSON.stringify(body));

describe('hostile input gets a clear 4xx in the error shape, and the server keeps serving', () => {
  it('malformed JSON → 400 invalid_json saying where it broke; an empty body says it is empty', async () => {
    const r = await post('/v1/videos', '{"prompt": "a",');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: { type: 'invalid_request_error', code: 'invalid_json', message: expect.stringMatching(/^the body is not valid JSON: .*position 15/), param: null },
    });
    const empty = await post('/v1/videos', '');
    expect(empty.json.error).toMatchObject({ code: 'invalid_json', message: 'the body is empty: send a JSON object' });
  });

  it('__proto__, constructor and prototype keys, at any depth → 400 invalid_body naming the key path, never dropped', async () => {
    const cases: Array<[string, string]> = [
      ['{"prompt":"a","__proto__":{"x":1}}', '__proto__'],
      ['{"prompt":"a","constructor":{"prototype":{"x":1}}}', 'constructor'],
      ['{"prompt":"a","size":{"inner":[1,{"prototype":2}]}}', 'size.inner.1.prototype'],
    ];
    for (const [body, param] of cases) {
      const r = await post('/v1/videos', body);
      expect({ body, status: r.status, code: r.json.error?.code, param: r.json.error?.param }).toEqual({ body, status: 400, code: 'invalid_body', param });
    }
    // Deep nesting is walked without recursion: the key found under 1,000 arrays (inside this server's 4 KiB limit).
    const deep = await post('/v1/videos', `{"prompt":"a","x":${'['.repeat(1000)}{"__proto__":1}${']'.repeat(1000)}}`);
    expect(deep.status).toBe(400);
    expect(deep.json.error.param).toBe(['x', ...Array<string>(1000).fill('0'), '__proto__'].join('.'));
  });

  it('a path id over 256 characters → 414 uri_too_long with a short message; up to 256 → 404 naming the field', async () => {
    const long = await get(`/v1/models/${'m'.repeat(10_000)}`);
    const body = long.json as any;
    expect([long.status, body.error.code]).toEqual([414, 'uri_too_long']);
    expect(body.error.message.length).toBeLessThan(200);
    const id = await get(`/v1/models/${'m'.repeat(200)}`);
    expect([id.status, id.json.error.param]).toEqual([404, 'model']);
  });

  it('a multipart field named after an Object.prototype property → 400 saying so', async () => {
    const form = new FormData();
    form.append('prompt', 'a');
    form.append('__proto__', 'x');
    const r = await post('/v1/videos', form, {});
    expect([r.status, r.json.error.code, r.json.error.message]).toEqual([400, 'invalid_body', expect.stringMatching(/Object\.prototype property/)]);
  });

  it('a multipart body cut off before its closing boundary → 400 invalid_body, not a server error', async () => {
    const body = '--zzz\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx';
    const r = await post('/v1/videos', body, { 'content-type': 'multipart/form-data; boundary=zzz' });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_body',
      message: expect.stringMatching(/multipart body could not be read/),
    });
  });

  it('a URL that is not valid percent-encoding → 400 in the error shape', async () => {
    for (const p of ['/v1/videos/%ff', '/demos/%ff']) {
      const res = await get(p);
      expect(res.status).toBe(400);
      expect((res.json as { error: { code: string } }).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_body' });
    }
  });

  it('a body over the limit → 413 body_too_large', async () => {
    const r = await postJson({ prompt: 'x'.repeat(10_000) });
    expect(r.status).toBe(413);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });
  });

  it('an upload over the multipart file limit, or too many fields → 413 naming the limit', async () => {
    const form = new FormData();
    form.append('prompt', 'a');
    form.append('input_reference', new Blob([new Uint8Array(2048)]), 'ref.png');
    const r = await post('/v1/videos', form, {});
    expect([r.status, r.json.error.code, r.json.error.message]).toEqual([413, 'body_too_large', 'the uploaded file is over 1024 bytes']);
    const many = new FormData();
    for (let i = 0; i < 33; i++) many.append(`f${i}`, 'x');
    const m = await post('/v1/videos', many, {});
    expect([m.status, m.json.error.code, m.json.error.message]).toEqual([413, 'body_too_large', 'the multipart body has more than 32 fields']);
  });

  it('an unsupported media type → 415 saying what was sent; multipart to the JSON-only images route → 415', async () => {
    const r = await post('/v1/videos', 'prompt=a', { 'content-type': 'text/plain' });
    expect(r.status).toBe(415);
    expect(r.json.error).toMatchObject({ code: 'unsupported_media_type', message: expect.stringMatching(/"text\/plain" is not taken here/) });
    const form = new FormData();
    form.append('prompt', 'a');
    const img = await post('/v1/images/generations', form, {});
    expect([img.status, img.json.error.code, img.json.error.message]).toEqual([
      415,
      'unsupported_media_type',
      expect.stringMatching(/takes application\/json; got multipart/),
    ]);
  });

  it('unknown fields, wrong types, a bad size, negative or fractional-frame seconds → 400 naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ prompt: 'a', frobnicate: 1 }, 'frobnicate'],
      [{ prompt: 42 }, 'prompt'],
      [{ prompt: 'a', num_frames: '3' }, 'num_frames'],
      [{ prompt: 'a', num_frames: 2.5 }, 'num_frames'],
      [{ prompt: 'a', seed: -1 }, 'seed'],
      [{ prompt: 'a', size: 'abc' }, 'size'],
      [{ prompt: 'a', size: '16x' }, 'size'],
      [{ prompt: 'a', seconds: -2 }, 'seconds'],
      [{ prompt: 'a', seconds: '-2' }, 'seconds'],
      // 0.1 s × 6 fps = 0.6 frames: rejected, never rounded
      [{ prompt: 'a', seconds: '0.1', fps: 6 }, 'seconds'],
      // past the engine's ceiling of 200 steps
      [{ prompt: 'a', num_inference_steps: 1000 }, 'num_inference_steps'],
      [{}, 'prompt'],
      [{ prompt: '' }, 'prompt'],
      [{ prompt: 'a', guidance_interval: [0.5, 0.25] }, 'guidance_interval'],
      [{ prompt: 'a', guidance_interval: [0, 2] }, 'guidance_interval.1'],
      [{ prompt: 'a', guidance_interval: [-1, 0.5] }, 'guidance_interval.0'],
      [{ prompt: 'a', guidance_interval: [0] }, 'guidance_interval'],
      [{ prompt: 'a', guidance_interval: '0,0.5' }, 'guidance_interval'],
      [{ prompt: 'a', guidance_interval: { start: 0, end: 0.5 } }, 'guidance_interval'],
      [{ prompt: 'a', eta: -0.5 }, 'eta'],
      [{ prompt: 'a', eta: 2 }, 'eta'],
      [{ prompt: 'a', eta: '0.5' }, 'eta'],
      [{ prompt: 'a', eta: null }, 'eta'],
      [{ prompt: 'a', eta: [1] }, 'eta'],
    ];
    for (const [body, param] of cases) {
      const r = await postJson(body);
      expect({ body, status: r.status, param: r.json.error?.param, type: r.json.error?.type }).toEqual({
        body,
        status: 400,
        param,
        type: 'invalid_request_error',
      });
      expect(typeof r.json.error.message).toBe('string');
    }
    // A wrong type says what is taken, not zod's "Invalid input"; so does a list query's bad limit.
    const obj = await postJson({ prompt: 'a', seconds: {} });
    expect(obj.json.error.message).toMatch(/seconds must be a number of seconds or a string of one, e\.g\. 4 or "4"/);
    const limit = await get('/v1/videos?limit=abc');
    expect([limit.status, limit.json.error]).toEqual([
      400,
      expect.objectContaining({ param: 'limit', message: expect.stringMatching(/limit must be an integer from 1 to 100/) }),
    ]);
    // An engine-side rejection names the HTTP field first in its message, then the request path it maps to.
    const steps = await postJson({ prompt: 'a', num_inference_steps: 1000 });
    expect(steps.json.error.message).toMatch(/^num_inference_steps \(diffusion\.numInferenceSteps\): /);
    const notObject = await post('/v1/videos', '[1,2]');
    expect(notObject.status).toBe(400);
  });

  it('multipart fields are validated the same way (numbers as text, strictly)', async () => {
    const form = new FormData();
    form.append('prompt', 'a');
    form.append('num_frames', '3abc');
    const r = await post('/v1/videos', form, {});
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('num_frames');
    // The message quotes what was sent, not zod's "expected number, received string".
    expect(r.json.error.message).toBe('num_frames: expected a number, got "3abc"');
    const json = await post('/v1/videos', JSON.stringify({ prompt: 'a', guidance_scale: [3] }));
    expect(json.json.error.message).toBe('guidance_scale: expected a number, got an array');
    // guidance_interval as "start,end": a reversed pair is refused for what it is, text that is not two numbers too.
    for (const [text, message] of [
      ['0.5,0.25', /start must not exceed end/],
      ['0,0.5,1', /as text: "start,end"/],
      ['abc', /as text: "start,end"/],
    ] as const) {
      const f = new FormData();
      f.append('prompt', 'a');
      f.append('guidance_interval', text);
      const g = await post('/v1/videos', f, {});
      expect([g.status, g.json.error.param]).toEqual([400, 'guidance_interval']);
      expect(g.json.error.message).toMatch(message);
    }
    // eta as text: a number in [0, 1]; anything else is refused naming the field.
    for (const text of ['1.5', '-1', 'abc', '0.5.5', '']) {
      const f = new FormData();
      f.append('prompt', 'a');
      f.append('eta', text);
      const e = await post('/v1/videos', f, {});
      expect({ text, status: e.status, param: e.json.error?.param }).toEqual({ text, status: 400, param: 'eta' });
    }
  });

  it('input_reference is rejected (no model does I2V), JSON or multipart, never ignored', async () => {
    const j = await postJson({ prompt: 'a', input_reference: { image_url: 'data:image/png;base64,AAAA' } });
    expect(j.status).toBe(400);
    expect(j.json.error).toMatchObject({ param: 'input_reference', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' });
    expect(j.json.error.message).toMatch(/I2V/);
    const form = new FormData();
    form.append('prompt', 'a');
    form.append('input_reference', new Blob([new Uint8Array(16)]), 'ref.png');
    const m = await post('/v1/videos', form, {});
    expect(m.status).toBe(400);
    expect(m.json.error.param).toBe('input_reference');
  });

  it('an unknown model → 404 naming model; an unknown job → 404; a job not finished → content 409', async () => {
    const r = await postJson({ prompt: 'a', model: 'nope' });
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ param: 'model', code: 'OMNIRX_ERR_UNKNOWN_MODEL', type: 'not_found_error' });
    const missing = await get('/v1/videos/video_missing');
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('not_found');
    const noRoute = await get('/v2/whatever');
    expect(noRoute.status).toBe(404);
    // A long job: its content is not there yet (409) until it completes; then it is cancelled.
    const job = await postJson({ prompt: 'a', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 });
    expect(job.status).toBe(200);
    const content = await get(`/v1/videos/${job.json.id}/content`);
    expect(content.status).toBe(409);
    expect(content.json.error).toMatchObject({ code: 'not_ready', type: 'conflict_error' });
    const del = await app.inject({ method: 'DELETE', url: `/v1/videos/${job.json.id}`, headers: auth });
    expect(del.statusCode).toBe(200);
  });

  it('images: n other than 1, a url response_format and an empty or blank prompt → 400 naming the field', async () => {
    const empty = await post('/v1/images/generations', JSON.stringify({ prompt: '' }));
    expect([empty.status, empty.json.error.param, empty.json.error.message]).toEqual([400, 'prompt', expect.stringMatching(/prompt must not be empty/)]);
    for (const path of ['/v1/images/generations', '/v1/videos']) {
      const blank = await post(path, JSON.stringify({ prompt: ' \t\n ' }));
      expect([path, blank.status, blank.json.error.param, blank.json.error.message]).toEqual([path, 400, 'prompt', expect.stringMatching(/only whitespace/)]);
    }
    const n = await post('/v1/images/generations', JSON.stringify({ prompt: 'a', n: 2 }));
    expect([n.status, n.json.error.param]).toEqual([400, 'n']);
    const fmt = await post('/v1/images/generations', JSON.stringify({ prompt: 'a', response_format: 'url' }));
    expect([fmt.status, fmt.json.error.param]).toEqual([400, 'response_format']);
  });

  it('auth: a missing or wrong bearer token → 401 on /v1; health, ready and metrics stay open', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: KEY }] as Array<Record<string, string>>) {
      const r = await get('/v1/models', headers);
      expect(r.status).toBe(401);
      expect(r.json.error).toMatchObject({ type: 'authentication_error', code: 'unauthorized' });
    }
    for (const p of ['/health', '/ready', '/metrics']) expect((await app.inject({ url: p })).statusCode).toBe(200);
  });
});

describe('on a real socket: what the HTTP parser refuses, stray upgrades, CONNECT and dropped connections; the server keeps serving', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await listen(app);
  });

  it('what the HTTP parser refuses (oversized headers, a garbage request line, a bad Content-Length) → the error shape', async () => {
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const s = connect(server.port, '127.0.0.1', () => s.write(request));
        let got = '';
        s.on('data', (d) => (got += d.toString('latin1')));
        s.on('close', () => resolve(got));
        s.on('error', reject);
      });
    const parse = (res: string) => ({ status: Number(res.split(' ')[1]), body: JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4)) });
    const big = parse(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(big).toEqual({
      status: 431,
      body: { error: { type: 'invalid_request_error', code: 'headers_too_large', message: expect.stringMatching(/limit of \d+ bytes/), param: null } },
    });
    for (const request of ['GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n', 'POST /v1/videos HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n']) {
      const r = parse(await raw(request));
      expect({ request, status: r.status, code: r.body.error.code, type: r.body.error.type }).toEqual({
        request,
        status: 400,
        code: 'malformed_request',
        type: 'invalid_request_error',
      });
      expect(r.body.error.message).toMatch(/^the request is not valid HTTP\/1\.1 \(HPE_/);
    }
    expect((await fetch(`${server.origin}/health`)).status).toBe(200);
  });

  it('upgrades other than a valid WebSocket handshake on a WebSocket path, and CONNECT, get the error shape', async () => {
    const raw = (request: string) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const s = connect(server.port, '127.0.0.1', () => s.write(request));
        let got = '';
        s.on('data', (d) => (got += d.toString('latin1')));
        s.on('close', () => resolve({ status: Number(got.split(' ')[1]), body: JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)) }));
        s.on('error', reject);
      });
    const ws = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n';
    const key = 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const cases: Array<[string, string, number, string]> = [
      ['h2c', 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n', 400, 'malformed_request'],
      ['unknown path', `GET /v1/nothere HTTP/1.1\r\nHost: x\r\n${ws}${key}\r\n`, 404, 'not_found'],
      ['no key', `GET /v1/rtc?token=${KEY} HTTP/1.1\r\nHost: x\r\n${ws}\r\n`, 400, 'malformed_request'],
      ['bad token', `GET /v1/rtc?token=nope HTTP/1.1\r\nHost: x\r\n${ws}${key}\r\n`, 401, 'unauthorized'],
      ['CONNECT', 'CONNECT evil:443 HTTP/1.1\r\nHost: evil:443\r\n\r\n', 405, 'method_not_allowed'],
    ];
    for (const [what, request, status, code] of cases) {
      const r = await raw(request);
      expect({ what, status: r.status, code: r.body.error.code, message: typeof r.body.error.message }).toEqual({ what, status, code, message: 'string' });
    }
    expect((await fetch(`${server.origin}/health`)).status).toBe(200);
  });

  it('100 rapid connects and disconnects (some with half a request or garbage), then a normal request succeeds', async () => {
    const garbage = ['', 'GET /v1/mod', 'POST /v1/videos HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{"pro', '\x00\x01\x02binary\xff'];
    await Promise.all(
      Array.from(
        { length: 100 },
        (_, i) =>
          new Promise<void>((resolve) => {
            const s = connect(server.port, '127.0.0.1', () => {
              const g = garbage[i % garbage.length]!;
              if (g !== '') s.write(g);
              s.destroy();
            });
            s.on('close', () => resolve());
            s.on('error', () => resolve());
          }),
      ),
    );
    const r = await fetch(`${server.origin}/v1/models`, { headers: auth });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).data.map((m: { id: string }) => m.id)).toEqual(['tiny']);
  });
});
