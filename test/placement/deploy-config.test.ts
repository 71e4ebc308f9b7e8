import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { loadDeployConfig, parseDeployConfig } from '../../src/placement/deploy-config';

const MiB = 2 ** 20;

function file(content: string | Buffer): string {
  const f = path.join(mkdtempSync(path.join(tmpdir(), 'omnirx-deploy-')), 'deploy.json');
  writeFileSync(f, content);
  return f;
}

describe('deploy config', () => {
  it('fills every default from a minimal file', async () => {
    const c = await loadDeployConfig(file('{"schemaVersion": 1}'));
    expect(c).toEqual({
      schemaVersion: 1,
      tasks: ['T2V', 'T2I', 'WORLD'],
      caches: { featureCacheBytes: 64 * MiB, chunkKvBytes: 256 * MiB, tokenKvBytes: 64 * MiB, tokenKvBlockTokens: 16 },
      sessions: { chunkFrames: 1, sinkFrames: 1, localWindowFrames: 6, steps: 2, firstChunkSteps: 16, maxSessions: 4, idleTimeoutMs: 60_000 },
    });
  });

  it('keeps given values', () => {
    const c = parseDeployConfig({
      schemaVersion: 1,
      tasks: ['WORLD'],
      caches: { chunkKvBytes: 1024 },
      sessions: { chunkFrames: 2, sinkFrames: 2, localWindowFrames: 4, steps: 4 },
    });
    expect(c.tasks).toEqual(['WORLD']);
    expect(c.caches.chunkKvBytes).toBe(1024);
    expect(c.caches.featureCacheBytes).toBe(64 * MiB);
    expect(c.sessions).toMatchObject({ chunkFrames: 2, sinkFrames: 2, localWindowFrames: 4, steps: 4, maxSessions: 4 });
  });

  it.each([
    [{}, 'schemaVersion'],
    [{ schemaVersion: 2 }, 'schemaVersion'],
    [{ schemaVersion: '1' }, 'schemaVersion'],
    [{ schemaVersion: 1, bogus: true }, ''],
    [{ schemaVersion: 1, tasks: [] }, 'tasks'],
    [{ schemaVersion: 1, tasks: ['T2X'] }, 'tasks.0'],
    [{ schemaVersion: 1, caches: { chunkKvBytes: -1 } }, 'caches.chunkKvBytes'],
    [{ schemaVersion: 1, caches: { chunkKvBytes: 1.5 } }, 'caches.chunkKvBytes'],
    [{ schemaVersion: 1, caches: { chunkKvBytes: 2 ** 60 } }, 'caches.chunkKvBytes'],
    [{ schemaVersion: 1, caches: { extra: 1 } }, 'caches'],
    [{ schemaVersion: 1, sessions: { steps: 0 } }, 'sessions.steps'],
    [{ schemaVersion: 1, sessions: { firstChunkSteps: 0 } }, 'sessions.firstChunkSteps'],
    [{ schemaVersion: 1, sessions: { idleTimeoutMs: 'soon' } }, 'sessions.idleTimeoutMs'],
    [{ schemaVersion: 1, sessions: { chunkFrames: 2, sinkFrames: 1 } }, 'sessions.localWindowFrames'],
    [{ schemaVersion: 1, modelsDir: '' }, 'modelsDir'],
    [{ schemaVersion: 1, matmulDtype: 'float16' }, 'matmulDtype'],
    [{ schemaVersion: 1, matmulDtype: 1 }, 'matmulDtype'],
    [null, ''],
    [[1, 2], ''],
  ])('rejects %j naming the field (%s)', (input, field) => {
    let err: unknown;
    try {
      parseDeployConfig(input, 'deploy.json');
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_CONFIG' });
    const message = (err as Error).message;
    expect(message.startsWith(`deploy.json: ${field || '(root)'}:`)).toBe(true);
    if (field) expect((err as { param?: string }).param).toBe(field);
  });

  it('files: invalid JSON (with the position), a missing file, an oversized file and a directory are clear errors', async () => {
    await expect(loadDeployConfig(file('{"schemaVersion": 1,'))).rejects.toMatchObject({
      code: 'OMNIRX_ERR_CONFIG',
      message: expect.stringMatching(/not valid JSON/),
    });
    await expect(loadDeployConfig('/nonexistent/deploy.json')).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG', message: expect.stringMatching(/ENOENT/) });
    await expect(loadDeployConfig(file(Buffer.alloc(MiB + 1, 0x20)))).rejects.toMatchObject({ message: expect.stringMatching(/more than the 1 MiB limit/) });
    // a device, a folder or a FIFO without a writer is refused before it is read (/dev/zero never ends: reading it whole grew memory without bound)
    const fifo = path.join(mkdtempSync(path.join(tmpdir(), 'omnirx-deploy-')), 'fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    for (const special of ['/dev/zero', '/dev/urandom', tmpdir(), fifo]) {
      await expect(loadDeployConfig(special)).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG', message: `${special}: not a regular file` });
    }
    await expect(loadDeployConfig(tmpdir())).rejects.toMatchObject({ code: 'OMNIRX_ERR_CONFIG' });
    await expect(loadDeployConfig(file('\u0000\u0001binary'))).rejects.toMatchObject({ message: expect.stringMatching(/not valid JSON/) });
  });
});
