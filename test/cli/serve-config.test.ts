import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { parseServeArgs, runServe } from '../../src/cli/serve';
import { makeModelsDir } from '../helpers/tiny-model';

/** The server's log lines on stderr (JSON, one per line). */
const logLines = (text: string) =>
  text
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { level: number; msg: string; route?: string });

function sink(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text };
}

function configFile(content: unknown): string {
  const f = path.join(mkdtempSync(path.join(tmpdir(), 'omnirx-serve-')), 'deploy.json');
  writeFileSync(f, typeof content === 'string' ? content : JSON.stringify(content));
  return f;
}

describe('omnirx serve --config', () => {
  it('parses the flag', () => {
    expect(parseServeArgs(['--config', '/etc/omnirx.json'], {}, () => undefined)).toMatchObject({ config: '/etc/omnirx.json' });
  });

  it('--matmul-dtype overrides the config; an unknown dtype exits 2 naming the flag', async () => {
    expect(parseServeArgs(['--matmul-dtype', 'bfloat16'], {}, () => undefined)).toMatchObject({ matmulDtype: 'bfloat16' });
    expect(() => parseServeArgs(['--matmul-dtype', 'int8'], {}, () => undefined)).toThrow(/--matmul-dtype <dtype>' argument 'int8' is invalid/);
    const err = sink();
    expect(await runServe(['--port', '0', '--matmul-dtype', 'half'], { stdout: sink().stream, stderr: err.stream })).toBe(2);
    expect(err.text()).toMatch(/--matmul-dtype/);
  });

  it('a bad deploy config exits 2 with the field named, before anything starts', async () => {
    const out = sink();
    const err = sink();
    const code = await runServe(['--port', '0', '--config', configFile({ schemaVersion: 1, sessions: { steps: 0 } })], {
      stdout: out.stream,
      stderr: err.stream,
    });
    expect(code).toBe(2);
    expect(err.text()).toMatch(/OMNIRX_ERR_CONFIG: .*sessions\.steps/);
    expect(out.text()).not.toMatch(/listening/);
    expect(await runServe(['--config', configFile('{oops')], { stdout: out.stream, stderr: err.stream })).toBe(2);
    expect(err.text()).toMatch(/not valid JSON/);
  });

  it('a bad flag value is reported once, on stderr, naming the flag (exit 2)', async () => {
    for (const argv of [
      ['--log-level', 'junk'],
      ['--ice-transport-policy', 'foo'],
    ]) {
      const out = sink();
      const err = sink();
      expect(await runServe(argv, { stdout: out.stream, stderr: err.stream })).toBe(2);
      expect(out.text()).toBe('');
      expect(err.text().match(/^error: /gm)).toHaveLength(1);
      expect(err.text()).toContain(argv[0]);
    }
  });

  it('a refused setting given as a flag is named by the flag (--data-dir, --ice-server)', async () => {
    const file = configFile({ schemaVersion: 1 }); // a file, not a folder
    const err = sink();
    expect(await runServe(['--port', '0', '--data-dir', file, '--log-level', 'silent'], { stdout: sink().stream, stderr: err.stream })).toBe(1);
    expect(err.text()).toMatch(/^error: --data-dir: OMNIRX_ERR_CONFIG: the data folder \(dataDir\) is a file/);
    const many = Array.from({ length: 9 }, (_, i) => ['--ice-server', `stun:s${i}.example`]).flat();
    const err2 = sink();
    expect(await runServe(many, { stdout: sink().stream, stderr: err2.stream })).toBe(2);
    expect(err2.text()).toMatch(/^error: --ice-server: OMNIRX_ERR_CONFIG: webrtc\.iceServers/);
  });

  it('refuses to start (exit 1) when the default model is not in the models folder', async () => {
    const modelsDir = await makeModelsDir();
    for (const config of [
      { schemaVersion: 1, modelsDir, defaultModel: 'nope' },
      { schemaVersion: 1, modelsDir: '/nonexistent/models', defaultModel: 'tiny' },
    ]) {
      const out = sink();
      const err = sink();
      expect(
        await runServe(['--port', '0', '--config', configFile(config)], { stdout: out.stream, stderr: err.stream, onSigterm: () => () => undefined }),
      ).toBe(1);
      expect(err.text()).toMatch(/the default model '(nope|tiny)' is not in/);
      expect(out.text()).not.toMatch(/listening/);
    }
  });

  it('serves the deployment the config describes (its models folder, default model and tasks)', async () => {
    const modelsDir = await makeModelsDir();
    const out = sink();
    const err = sink();
    const abort = new AbortController();
    const running = runServe(['--port', '0', '--config', configFile({ schemaVersion: 1, modelsDir, defaultModel: 'tiny', tasks: ['T2V'] })], {
      stdout: out.stream,
      stderr: err.stream,
      signal: abort.signal,
      onSigterm: () => () => undefined,
    });
    while (!/listening on (\S+)/.test(out.text())) await new Promise((r) => setTimeout(r, 20));
    const base = /listening on (\S+)/.exec(out.text())![1];
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toContain('tiny');
    abort.abort();
    expect(await running).toBe(0);
    // stderr holds the logs (JSON lines at the default level, info): the request's access line, nothing at warn or above.
    const logs = logLines(err.text());
    expect(logs).toContainEqual(expect.objectContaining({ level: 30, msg: 'request completed', route: '/v1/models' }));
    expect(logs.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('serves a disaggregated deployment (topology: in-process stages): /ready and /v1/models answer', async () => {
    const modelsDir = await makeModelsDir();
    const out = sink();
    const err = sink();
    const abort = new AbortController();
    const config = { schemaVersion: 1, modelsDir, defaultModel: 'tiny', tasks: ['T2V', 'WORLD'], topology: { kind: 'disaggregated', connector: 'in-process' } };
    const running = runServe(['--port', '0', '--config', configFile(config)], {
      stdout: out.stream,
      stderr: err.stream,
      signal: abort.signal,
      onSigterm: () => () => undefined,
    });
    while (!/listening on (\S+)/.test(out.text())) await new Promise((r) => setTimeout(r, 20));
    const base = /listening on (\S+)/.exec(out.text())![1];
    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', queued: 0, running: 0, memoryBytes: 0, sessions: 0 });
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string; object: string }> };
    expect(models.data.map((m) => [m.id, m.object])).toEqual([['tiny', 'model']]);
    abort.abort();
    expect(await running).toBe(0);
    expect(logLines(err.text()).filter((l) => l.level >= 40)).toEqual([]);
  });
});
