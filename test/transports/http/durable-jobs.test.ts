/**
 * Durable video jobs (`dataDir`): a second server over the same data folder lists and serves what the first finished,
 * runs what it left queued, and reports what it was running as interrupted; one server per folder; a damaged or
 * foreign database, or a folder that is a file, is refused at start naming the file and `dataDir`; retention bounds.
 * Requests go through `app.inject()`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { createApp } from './helpers';
import { makeModelsDir } from '../../helpers/tiny-model';
import { createServer, type ServerOptions } from '../../../transports/server';
import { Engine } from '../../../src/engine/engine';
import { builtinFamilies } from '../../../src/families';
import { OmniError } from '../../../src/errors';
import { parseServeArgs } from '../../../src/cli/serve';

let modelsDir: string;
beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

const SHORT = { prompt: 'a red ball', size: '16x16', num_frames: 3, fps: 6, num_inference_steps: 2, seed: 1 };
const LONG = { prompt: 'a', size: '40x40', num_frames: 40, num_inference_steps: 50, guidance_scale: 1 };

const freshDir = () => mkdtempSync(path.join(tmpdir(), 'omnirx-data-'));

async function post(app: FastifyInstance, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await app.inject({ method: 'POST', url: '/v1/videos', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  expect(res.statusCode).toBe(200);
  return res.json() as Record<string, any>;
}

async function getJob(app: FastifyInstance, id: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await app.inject({ url: `/v1/videos/${id}` });
  return { status: res.statusCode, body: res.json() as Record<string, any> };
}

/** Polls job `id` until its status is one of `statuses` (or fails the test after `ms`). */
async function waitStatus(app: FastifyInstance, id: string, statuses: string[], ms = 60_000): Promise<Record<string, any>> {
  const until = Date.now() + ms;
  for (;;) {
    const { body } = await getJob(app, id);
    if (statuses.includes(body.status as string)) return body;
    if (Date.now() > until) throw new Error(`job ${id} is still ${String(body.status)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function content(app: FastifyInstance, id: string): Promise<{ status: number; bytes: Buffer; json: () => any }> {
  const res = await app.inject({ url: `/v1/videos/${id}/content` });
  return { status: res.statusCode, bytes: res.rawPayload, json: () => res.json() };
}

/** A server on the tiny model whose engine runs one job at a time, so a second job waits `queued`. */
async function oneAtATime(dataDir: string, extra: ServerOptions = {}): Promise<FastifyInstance> {
  const engine = await Engine.create({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', maxRunning: 1 });
  return createApp({ engine, dataDir, admitWaitMs: 100, ...extra });
}

/** What creating a server on `dataDir` throws (it must throw). */
async function startError(options: ServerOptions): Promise<OmniError> {
  const err = await createServer({ families: builtinFamilies(), modelsDir, defaultModel: 'tiny', ...options }).then(
    async (app) => {
      await app.close();
      throw new Error('the server started');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OmniError);
  return err as OmniError;
}

describe('a restart over the same data folder', () => {
  it('keeps finished jobs listed and downloadable byte for byte, runs the queued one, and fails the running one as interrupted', async () => {
    const dataDir = freshDir();
    const first = await oneAtATime(dataDir);
    const done = await post(first, SHORT);
    await waitStatus(first, done.id as string, ['completed']);
    const mp4 = (await content(first, done.id as string)).bytes;
    expect(mp4.length).toBeGreaterThan(100);
    const running = await post(first, LONG);
    expect(running.status).toBe('in_progress');
    const queued = await post(first, { ...SHORT, seed: 2 });
    expect(queued.status).toBe('queued');
    await first.close(); // no drain: the running job is cut off, the queued one never started

    expect(existsSync(path.join(dataDir, 'videos', `${done.id}.mp4`))).toBe(true);
    const second = await createApp({ modelsDir, dataDir });
    try {
      const list = (await second.inject({ url: '/v1/videos' })).json() as { data: Array<Record<string, any>> };
      expect(list.data.map((j) => j.id)).toEqual([queued.id, running.id, done.id]);
      const kept = list.data[2]!;
      expect(kept).toMatchObject({ status: 'completed', progress: 100, prompt: 'a red ball', size: '16x16', seed: 1, num_frames: 3 });
      const again = await content(second, done.id as string);
      expect(again.status).toBe(200);
      expect(again.bytes.equals(mp4)).toBe(true);
      expect((await getJob(second, running.id as string)).body).toMatchObject({
        status: 'failed',
        error: { code: 'OMNIRX_ERR_INTERRUPTED', message: expect.stringContaining('the server stopped while the job ran') },
      });
      const ran = await waitStatus(second, queued.id as string, ['completed', 'failed']);
      expect(ran).toMatchObject({ status: 'completed', seed: 2, error: null });
      expect((await content(second, queued.id as string)).status).toBe(200);
      // A finished job's event stream replays its last event.
      const events = await second.inject({ url: `/v1/videos/${done.id}/events` });
      expect(events.payload).toContain('event: final');
    } finally {
      await second.close();
    }
    // ...and a third start still has all three, finished.
    const third = await createApp({ modelsDir, dataDir });
    try {
      const list = (await third.inject({ url: '/v1/videos' })).json() as { data: Array<Record<string, any>> };
      expect(list.data.map((j) => [j.id, j.status])).toEqual([
        [queued.id, 'completed'],
        [running.id, 'failed'],
        [done.id, 'completed'],
      ]);
    } finally {
      await third.close();
    }
  });

  it('a drain records the job it fails, keeps the queued one for the next start, and leaves the finished MP4s', async () => {
    const dataDir = freshDir();
    const first = await oneAtATime(dataDir);
    const done = await post(first, SHORT);
    await waitStatus(first, done.id as string, ['completed']);
    const running = await post(first, LONG);
    const queued = await post(first, { ...SHORT, seed: 5 });
    expect(queued.status).toBe('queued');
    expect(await first.omnirx.drain(0)).toEqual({ finished: 0, failed: 1, kept: 1 });
    expect(readdirSync(path.join(dataDir, 'videos'))).toEqual([`${done.id}.mp4`]);

    const second = await createApp({ modelsDir, dataDir });
    try {
      expect((await getJob(second, running.id as string)).body).toMatchObject({
        status: 'failed',
        error: { code: 'OMNIRX_ERR_UNAVAILABLE', message: 'the server shut down before the job finished' },
      });
      expect(await waitStatus(second, queued.id as string, ['completed', 'failed'])).toMatchObject({ status: 'completed' });
      expect((await content(second, done.id as string)).status).toBe(200);
    } finally {
      await second.close();
    }
  });

  it('without a data folder nothing outlives the server (the temporary MP4 folder is removed)', async () => {
    const app = await createApp({ modelsDir });
    const job = await post(app, SHORT);
    await waitStatus(app, job.id as string, ['completed']);
    const dir = app.omnirx.jobs.store.dir;
    expect(existsSync(dir)).toBe(true);
    await app.close();
    expect(existsSync(dir)).toBe(false);
  });
});

describe('the data folder', () => {
  it('is used by one server at a time; a lock left by a dead process is taken over', async () => {
    const dataDir = freshDir();
    const app = await createApp({ modelsDir, dataDir });
    try {
      const err = await startError({ dataDir });
      expect(err).toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'dataDir' });
      expect(err.message).toContain(`in use by another server (pid ${process.pid}`);
    } finally {
      await app.close();
    }
    expect(existsSync(path.join(dataDir, 'server.lock'))).toBe(false);
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(path.join(dataDir, 'server.lock'), `${dead}\n`);
    const next = await createApp({ modelsDir, dataDir });
    expect(readFileSync(path.join(dataDir, 'server.lock'), 'utf8')).toBe(`${process.pid}\n`);
    await next.close();
  });

  it('refuses a folder that is a file, and a jobs.sqlite that is not a job database, naming the file and dataDir', async () => {
    const parent = freshDir();
    const file = path.join(parent, 'not-a-folder');
    writeFileSync(file, 'x');
    expect(await startError({ dataDir: file })).toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'dataDir', message: expect.stringContaining('is a file') });

    const garbage = freshDir();
    writeFileSync(path.join(garbage, 'jobs.sqlite'), Buffer.alloc(8192, 0x5a));
    const corrupt = await startError({ dataDir: garbage });
    expect(corrupt).toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'dataDir' });
    expect(corrupt.message).toMatch(/^jobs\.sqlite in the data folder \(dataDir\) .*not a database/);
    expect(corrupt.message).not.toContain(garbage);
    // The refused start released the folder again.
    expect(existsSync(path.join(garbage, 'server.lock'))).toBe(false);

    const foreign = freshDir();
    const other = new Database(path.join(foreign, 'jobs.sqlite'));
    other.exec('CREATE TABLE recipes (name TEXT)');
    other.close();
    expect((await startError({ dataDir: foreign })).message).toContain('a SQLite database of something else (tables: recipes)');

    const newer = freshDir();
    const future = new Database(path.join(newer, 'jobs.sqlite'));
    future.pragma('user_version = 99');
    future.close();
    expect((await startError({ dataDir: newer })).message).toContain('written by a newer omnirx (job schema version 99; this one reads up to 1)');
  });

  it('answers 410 naming the job, never a 500 or a path, when a stored MP4 is missing or damaged', async () => {
    const dataDir = freshDir();
    const first = await createApp({ modelsDir, dataDir });
    const a = await post(first, SHORT);
    const b = await post(first, { ...SHORT, seed: 9 });
    await waitStatus(first, a.id as string, ['completed']);
    await waitStatus(first, b.id as string, ['completed']);
    await first.close();
    rmSync(path.join(dataDir, 'videos', `${a.id}.mp4`));
    truncateSync(path.join(dataDir, 'videos', `${b.id}.mp4`), 10);
    const second = await createApp({ modelsDir, dataDir });
    let secondOpen = true;
    try {
      for (const id of [a.id as string, b.id as string]) {
        const res = await content(second, id);
        expect(res.status).toBe(410);
        expect(res.json().error).toMatchObject({ code: 'gone', param: 'id', message: expect.stringContaining(`video '${id}'`) });
        expect(JSON.stringify(res.json())).not.toContain(dataDir);
      }
      // A folder put by hand where a job's MP4 belongs: the job is still deletable, and the next start is not blocked.
      rmSync(path.join(dataDir, 'videos', `${b.id}.mp4`));
      mkdirSync(path.join(dataDir, 'videos', `${b.id}.mp4`, 'inner'), { recursive: true });
      const c = await post(second, { ...SHORT, seed: 11 });
      await waitStatus(second, c.id as string, ['completed']);
      await second.close();
      secondOpen = false;
      mkdirSync(path.join(dataDir, 'videos', `video_nobody.mp4`));
      const third = await createApp({ modelsDir, dataDir });
      try {
        expect((await third.inject({ method: 'DELETE', url: `/v1/videos/${b.id}` })).statusCode).toBe(200);
        expect(existsSync(path.join(dataDir, 'videos', `${b.id}.mp4`))).toBe(false);
        expect(existsSync(path.join(dataDir, 'videos', 'video_nobody.mp4'))).toBe(false);
      } finally {
        await third.close();
      }
    } finally {
      if (secondOpen) await second.close();
    }
  });
});

describe('retention with a data folder', () => {
  it('forgets the oldest finished job past maxFinishedJobs, row and file together, across restarts', async () => {
    const dataDir = freshDir();
    const first = await createApp({ modelsDir, dataDir, maxFinishedJobs: 1 });
    const old = await post(first, SHORT);
    await waitStatus(first, old.id as string, ['completed']);
    const recent = await post(first, { ...SHORT, seed: 4 });
    await waitStatus(first, recent.id as string, ['completed']);
    await new Promise((r) => setTimeout(r, 100));
    expect((await getJob(first, old.id as string)).status).toBe(404);
    expect(readdirSync(path.join(dataDir, 'videos'))).toEqual([`${recent.id}.mp4`]);
    await first.close();
    // A lower bound at the next start trims what was kept.
    const second = await createApp({ modelsDir, dataDir, maxStoredVideos: 1 });
    try {
      const list = (await second.inject({ url: '/v1/videos' })).json() as { data: Array<{ id: string }> };
      expect(list.data.map((j) => j.id)).toEqual([recent.id]);
    } finally {
      await second.close();
    }
  });

  it('forgets finished jobs jobRetentionSeconds after they finished, and refuses a bad retention', async () => {
    const dataDir = freshDir();
    const app = await createApp({ modelsDir, dataDir, jobRetentionSeconds: 1 });
    try {
      const job = await post(app, SHORT);
      await waitStatus(app, job.id as string, ['completed']);
      const until = Date.now() + 10_000;
      while ((await getJob(app, job.id as string)).status !== 404) {
        if (Date.now() > until) throw new Error('the job was not forgotten');
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(readdirSync(path.join(dataDir, 'videos'))).toEqual([]);
    } finally {
      await app.close();
    }
    expect(await startError({ jobRetentionSeconds: 0 })).toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param: 'jobRetentionSeconds' });
  });
});

describe('omnirx serve --data-dir', () => {
  it('passes the data folder on, and leaves it out by default', () => {
    expect(parseServeArgs(['--data-dir', '/var/lib/omnirx'], {}, () => undefined)).toMatchObject({ dataDir: '/var/lib/omnirx' });
    expect(parseServeArgs([], {}, () => undefined)).not.toHaveProperty('dataDir');
  });
});
