/**
 * The server's time limits: a request that does not arrive whole within `requestTimeoutMs` is answered 408
 * `request_timeout` and its connection closed, whether it stalls in the headers or in the body; a request that takes
 * longer than that to answer (a slow image generation), and a quiet SSE stream, are not cut; the server keeps serving.
 */
import * as net from 'node:net';
import { concat, ignoreElements, timer } from 'rxjs';
import { Engine } from '../../../src/engine/engine';
import { builtinFamilies } from '../../../src/families';
import { createServer } from '../../../transports/server';
import { makeModelsDir } from '../../helpers/tiny-model';
import { listen, readSse, type TestServer } from './helpers';

const REQUEST_TIMEOUT_MS = 1000;
const ANSWER_DELAY_MS = 3000; // three request timeouts: a cut by any socket or request timer would show
let server: TestServer;

beforeAll(async () => {
  const engine = await Engine.create({ families: builtinFamilies(), modelsDir: await makeModelsDir(), defaultModel: 'tiny' });
  // the engine, answering every request ANSWER_DELAY_MS late with nothing on the wire in between
  const slow = Object.assign(Object.create(engine) as Engine, {
    generate: (r: Parameters<Engine['generate']>[0]) => concat(timer(ANSWER_DELAY_MS).pipe(ignoreElements()), engine.generate(r)),
  });
  const app = await createServer({ engine: slow, requestTimeoutMs: REQUEST_TIMEOUT_MS });
  await app.omnirx.engineReady;
  server = await listen(app);
});

afterAll(async () => {
  await server?.app.close();
});

/** Writes `head` on a raw connection and never finishes the request; what the server sent, and when it closed. */
function stall(head: string): Promise<{ reply: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const s = net.connect(server.port, '127.0.0.1', () => s.write(head));
    let reply = '';
    s.on('data', (d) => (reply += d.toString()));
    s.on('error', reject);
    s.on('close', () => resolve({ reply, ms: Date.now() - t0 }));
  });
}

describe('server time limits', () => {
  it.each([
    ['nothing at all', ''],
    ['part of the headers', 'POST /v1/images/generations HTTP/1.1\r\nHost: x\r\n'],
    ['part of the body', 'POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pro'],
  ])(
    'a request stalled in %s is answered 408 request_timeout, and the connection closed',
    async (_what, head) => {
      const { reply, ms } = await stall(head);
      expect(reply).toMatch(/^HTTP\/1\.1 408 /);
      expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'request_timeout' } });
      // the timeout, plus at most the one-second check interval and some slack for a busy machine
      expect(ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS + 1000 + 5000);
      expect((await fetch(`${server.origin}/health`)).status).toBe(200);
    },
    30_000,
  );

  it('an image request answered after several request timeouts gets its image', async () => {
    const t0 = Date.now();
    const r = await fetch(`${server.origin}/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'a red ball', size: '16x16', num_inference_steps: 2 }),
    });
    expect(r.status).toBe(200);
    expect((await r.json()) as { data: unknown[] }).toMatchObject({ data: [expect.objectContaining({ b64_json: expect.any(String) })] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(ANSWER_DELAY_MS);
  }, 30_000);

  it("a job's SSE stream quiet for several request timeouts runs to its final event", async () => {
    const created = await fetch(`${server.origin}/v1/videos`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'a red ball', size: '16x16', num_frames: 1, num_inference_steps: 2 }),
    });
    const { id } = (await created.json()) as { id: string };
    const sse = await readSse(`${server.origin}/v1/videos/${id}/events`);
    expect(sse.status).toBe(200);
    expect(sse.events.at(-1)?.event).toBe('final');
  }, 30_000);

  it('refuses a request timeout that is not an integer in [100 ms, 1 h], naming it', async () => {
    for (const bad of [0, 99, 1.5, 3_600_001, Number.NaN]) {
      await expect(createServer({ families: [], requestTimeoutMs: bad })).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'requestTimeoutMs' });
    }
  });
});
