/**
 * `omnirx models`: the models of a folder with their family and tasks, the default marked; a model whose model.json
 * cannot be used listed as unusable with the reason (exit 1), so a deployment mistake shows before serving.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';
import { makeModelsDir } from '../helpers/tiny-model';

class Sink extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.text += chunk.toString();
    cb();
  }
}

async function models(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [stdout, stderr] = [new Sink(), new Sink()];
  const code = await main(['models', ...args], { stdout, stderr, createEngine: () => Promise.reject(new Error('models loads no engine')) });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

describe('omnirx models', () => {
  it('lists the package models by default: the embedded default, its family and tasks, marked default', async () => {
    expect(await models([])).toEqual({ code: 0, stdout: 'omnirx-default  wan-t2v  T2V,T2I,WORLD  (default)\n', stderr: '' });
  });

  it('lists every model of --models-dir in order, a broken model.json and an unknown family as unusable with the reason, and exits 1', async () => {
    const dir = await makeModelsDir();
    mkdirSync(path.join(dir, 'bar'));
    writeFileSync(path.join(dir, 'bar', 'model.json'), '{oops');
    mkdirSync(path.join(dir, 'foo'));
    writeFileSync(path.join(dir, 'foo', 'model.json'), JSON.stringify({ id: 'foo', family: 'nope' }));
    const r = await models(['--models-dir', dir]);
    expect(r.code).toBe(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines.map((l) => l.split('  ')[0])).toEqual(['bar', 'foo', 'tiny']);
    expect(lines[0]).toMatch(/^bar {2}unusable: .*model\.json: not valid JSON/);
    expect(lines[1]).toMatch(/^foo {2}unusable: .*'nope'/);
    expect(lines[2]).toBe('tiny  wan-t2v  T2V,T2I,WORLD');
  });

  it('a folder that does not exist, or holds no model, is an error (exit 1); a bad flag exits 2', async () => {
    expect(await models(['--models-dir', '/nonexistent/models'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: the models folder /nonexistent/models does not exist\n',
    });
    const empty = path.join(await makeModelsDir(), 'tiny', 'text_encoder'); // a folder, no model.json below it
    mkdirSync(empty, { recursive: true });
    expect((await models(['--models-dir', empty])).stderr).toBe(`error: no models in ${empty} (a model is a folder holding model.json)\n`);
    expect((await models(['--bogus'])).code).toBe(2);
  });
});
