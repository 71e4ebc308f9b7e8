import { rmSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { Engine, type OmniEvent } from 'omnirx';
import { builtinFamilies } from 'omnirx/families';
import { createServer } from 'omnirx/server';
import { PNG } from 'pngjs';
import { lastValueFrom, toArray } from 'rxjs';
import { imageOf, makeMixedModelsDir } from './helpers';
import { family as toyFamily } from './toy-image';

let modelsDir: string;
let app: FastifyInstance;

const post = (url: string, payload: Record<string, unknown>) => app.inject({ method: 'POST', url, payload });

beforeAll(async () => {
  modelsDir = await makeMixedModelsDir();
  app = await createServer({ families: [...builtinFamilies(), toyFamily], modelsDir, defaultModel: 'tiny' });
  await app.omnirx.engineReady;
});

afterAll(async () => {
  await app.close();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe('the HTTP server over a second model family', () => {
  it('lists the toy model beside Wan on GET /v1/models', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/models' });
    expect(res.statusCode).toBe(200);
    const ids = (res.json() as { data: Array<{ id: string }> }).data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['tiny', 'toy']));
  });

  it('answers POST /v1/images/generations for the toy model with a PNG of the engine’s pixels', async () => {
    const res = await post('/v1/images/generations', { model: 'toy', prompt: 'a red fox in the snow', size: '24x16', seed: 7 });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { data: Array<{ b64_json: string }> };
    const png = PNG.sync.read(Buffer.from(body.data[0].b64_json, 'base64'));
    expect([png.width, png.height]).toEqual([24, 16]);
    // The same request on an engine of its own: the PNG holds exactly its pixels (RGBA, opaque).
    const engine = await Engine.create({ families: [...builtinFamilies(), toyFamily], modelsDir, defaultModel: 'tiny', tasks: ['T2I'] });
    try {
      const events: OmniEvent[] = await lastValueFrom(
        engine
          .generate({ model: 'toy', task: 'T2I', inputs: { prompt: 'a red fox in the snow' }, diffusion: { width: 24, height: 16, seed: 7 } })
          .pipe(toArray()),
      );
      const rgb = imageOf(events).pixels;
      const fromPng = Buffer.alloc(24 * 16 * 3);
      for (let i = 0; i < 24 * 16; i++) {
        png.data.copy(fromPng, i * 3, i * 4, i * 4 + 3);
        expect(png.data[i * 4 + 3]).toBe(255);
      }
      expect(fromPng.equals(rgb)).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it('answers what the family refuses with its error, naming the HTTP field', async () => {
    const res = await post('/v1/images/generations', { model: 'toy', prompt: 'a fox', size: '26x16' });
    expect(res.statusCode).toBe(400);
    const { error } = res.json() as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', param: 'size' });
    expect(error.message).toMatch(/toy/);
  });
});
