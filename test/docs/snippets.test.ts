/**
 * Every code block of the README and docs/ meant to be run is run here, as a user would paste it, so no snippet rots:
 *
 * - ```ts blocks are compiled strict (as a user's project would, importing `omnirx`, `omnirx/pipeline`, ... through the
 *   package's `exports`) and run with node; top-level `await` is allowed (the body runs in an async function). A URL of
 *   `http://127.0.0.1:8000` is pointed at a server this test starts.
 * - ```sh blocks run in bash in a scratch folder laid out as a clone (its `dist/` and `models/` linked), with `omnirx` on
 *   PATH as the package's command.
 * - A block that is not a whole program or command (a usage synopsis, a fragment of a larger program, a command that
 *   takes minutes) says so on its fence, after the language: ```` ```ts no-run (a fragment) ````.
 *
 * Scratch files live in the run's temporary root; `node_modules` there links the repository's packages and `omnirx`
 * itself, so resolution is an installed user's.
 */
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { builtinFamilies } from '../../src/families';
import { createServer } from 'omnirx/server';

const ROOT = path.resolve(__dirname, '..', '..');
const DOCS = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

interface Block {
  file: string;
  line: number;
  lang: string;
  info: string;
  code: string;
}

/** The fenced blocks of `file` (relative to the repository root). */
function blocksOf(file: string): Block[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]);
    if (open === null) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]); i++) body.push(lines[i]);
    out.push({ file, line: start + 1, lang: open[1], info: open[2], code: body.join('\n') });
  }
  return out;
}

const blocks = DOCS.flatMap(blocksOf);
const runnable = (b: Block) => (b.lang === 'ts' || b.lang === 'sh') && !/\bno-run\b/.test(b.info);
const scratch = mkdtempSync(path.join(tmpdir(), 'omnirx-snippets-'));
let server: FastifyInstance;
let origin: string;

beforeAll(async () => {
  // node_modules of an installed user: the repository's packages, and omnirx itself.
  mkdirSync(path.join(scratch, 'node_modules', '@types'), { recursive: true });
  for (const name of readdirSync(path.join(ROOT, 'node_modules'))) {
    if (name.startsWith('.') || name === '@types') continue;
    symlinkSync(path.join(ROOT, 'node_modules', name), path.join(scratch, 'node_modules', name));
  }
  for (const name of readdirSync(path.join(ROOT, 'node_modules', '@types')))
    symlinkSync(path.join(ROOT, 'node_modules', '@types', name), path.join(scratch, 'node_modules', '@types', name));
  symlinkSync(ROOT, path.join(scratch, 'node_modules', 'omnirx'));
  mkdirSync(path.join(scratch, 'bin'));
  writeFileSync(path.join(scratch, 'bin', 'omnirx'), `#!/bin/sh\nexec "${process.execPath}" "${path.join(ROOT, 'dist', 'src', 'cli', 'main.js')}" "$@"\n`, {
    mode: 0o755,
  });
  server = await createServer({ families: builtinFamilies() });
  await server.omnirx.engineReady;
  await server.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await server?.close();
});

/**
 * Runs a command without blocking this process's event loop (the server the blocks call lives in it) and resolves
 * with its exit status (null when killed at `timeoutMs`) and stderr.
 */
function run(cmd: string, args: string[], options: SpawnOptions, timeoutMs: number): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stderr });
    });
  });
}

/** A ts block as a module: its imports first, the rest in an async main that must settle. */
function program(code: string): string {
  const lines = code.replace(/http:\/\/127\.0\.0\.1:8000/g, origin).split('\n');
  const imports: string[] = [];
  const body: string[] = [];
  let inImport = false;
  for (const l of lines) {
    if (/^import\s/.test(l) || inImport) {
      imports.push(l);
      inImport = !/;\s*$/.test(l);
    } else body.push(l);
  }
  return `${imports.join('\n')}\n\nasync function main(): Promise<void> {\n${body.join('\n')}\n}\n\nmain().then(\n  () => process.exit(0),\n  (e: unknown) => {\n    console.error(e);\n    process.exit(1);\n  },\n);\n`;
}

const ts = blocks.filter((b) => b.lang === 'ts' && runnable(b));
const sh = blocks.filter((b) => b.lang === 'sh' && runnable(b));

describe('documentation code blocks', () => {
  it('there are runnable blocks in the README and the docs, and every block that is not says why on its fence', () => {
    expect(ts.length).toBeGreaterThan(3);
    for (const b of blocks.filter((x) => (x.lang === 'ts' || x.lang === 'sh') && !runnable(x)))
      expect(`${b.file}:${b.line} ${b.info}`).toMatch(/no-run \(.+\)/);
  });

  it('every ts block compiles strict as a user project', () => {
    const dir = path.join(scratch, 'ts');
    mkdirSync(dir, { recursive: true });
    const names = ts.map((b, i) => {
      const name = `${path.basename(b.file, '.md')}-${b.line}-${i}.ts`;
      writeFileSync(path.join(dir, name), program(b.code));
      return name;
    });
    const config = {
      compilerOptions: {
        strict: true,
        target: 'ES2022',
        module: 'node16',
        moduleResolution: 'node16',
        skipLibCheck: true,
        types: ['node'],
        outDir: 'out',
        rootDir: '.',
      },
      files: names,
    };
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(config));
    const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  }, 120_000);

  it.each(ts.map((b, i) => [`${b.file}:${b.line}`, i] as const))(
    '%s runs to completion',
    async (_where, i) => {
      const b = ts[i];
      const js = path.join(scratch, 'ts', 'out', `${path.basename(b.file, '.md')}-${b.line}-${i}.js`);
      const r = await run(process.execPath, [js], { cwd: scratch }, 290_000);
      expect({ status: r.status, stderr: r.status === 0 ? '' : r.stderr }).toEqual({ status: 0, stderr: '' });
    },
    300_000,
  );

  it.each(sh.map((b, i) => [`${b.file}:${b.line}`, i] as const))(
    '%s runs in bash',
    async (_where, i) => {
      const cwd = mkdtempSync(path.join(scratch, 'sh-'));
      for (const dir of ['dist', 'models', 'node_modules']) symlinkSync(path.join(ROOT, dir), path.join(cwd, dir));
      const env = { ...process.env, PATH: `${path.join(scratch, 'bin')}:${process.env.PATH}` };
      const r = await run('bash', ['-euo', 'pipefail', '-c', sh[i].code], { cwd, env }, 110_000);
      expect({ status: r.status, stderr: r.status === 0 ? '' : r.stderr }).toEqual({ status: 0, stderr: '' });
    },
    120_000,
  );
});
