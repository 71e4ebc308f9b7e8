/**
 * The project's rules are checked, not hoped for: in a temporary copy of the sources, each planted violation makes
 * its tool fail, naming the rule and the file — an import running up the planes (the engine importing a model
 * family), an import cycle, a transport reaching into a sibling (dependency-cruiser, the first step of `npm run lint`),
 * an unused variable (typescript-eslint) and code prettier would rewrite (`prettier --check`).
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
let copy: string;

/** Runs `args` with node's npm/npx in the copy; exit status and all output. */
function run(cmd: string, args: string[]): { status: number | null; out: string } {
  // no colour codes in the output the tests match (prettier colours its `[warn]` where the terminal allows)
  const r = spawnSync(cmd, args, { cwd: copy, encoding: 'utf8', timeout: 110_000, env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' } });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

beforeAll(() => {
  copy = mkdtempSync(path.join(tmpdir(), 'omnirx-lint-'));
  for (const entry of [
    'src',
    'operators',
    'transports',
    'bench',
    'examples',
    'package.json',
    'tsconfig.json',
    '.dependency-cruiser.cjs',
    'eslint.config.mjs',
    '.prettierrc.json',
    '.prettierignore',
  ]) {
    cpSync(path.join(ROOT, entry), path.join(copy, entry), { recursive: true });
  }
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
});

describe('lint on planted violations', () => {
  it('the untouched copy passes the dependency rules, and the file the last test plants in passes eslint and prettier', () => {
    expect(run('npm', ['run', '-s', 'lint:deps'])).toMatchObject({ status: 0 });
    expect(run('npx', ['eslint', 'operators/credit-gate.ts'])).toMatchObject({ status: 0 });
    expect(run('npx', ['prettier', '--check', 'operators/credit-gate.ts'])).toMatchObject({ status: 0 });
  }, 120_000);

  it('npm run lint fails on an import up the planes, a cycle and a transport importing a sibling, naming each rule and file', () => {
    appendFileSync(path.join(copy, 'src/engine/engine.ts'), "\nimport '../families/wan';\n");
    appendFileSync(path.join(copy, 'src/request/limits.ts'), "\nimport './omni-request';\n");
    appendFileSync(path.join(copy, 'transports/ws/plugin.ts'), "\nimport '../http/plugin';\n");
    const r = run('npm', ['run', '-s', 'lint']);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/no-family-above-the-pipeline: src\/engine\/engine\.ts → src\/families\/wan\/index\.ts/);
    expect(r.out).toMatch(/no-circular: src\/request\/limits\.ts →/);
    expect(r.out).toMatch(/transports-are-siblings: transports\/ws\/plugin\.ts → transports\/http\/plugin\.ts/);
  }, 120_000);

  it('typescript-eslint fails on an unused variable, and prettier on code it would rewrite', () => {
    const file = path.join(copy, 'operators/credit-gate.ts');
    writeFileSync(file, `${readFileSync(file, 'utf8')}\nexport function planted(): number {\n  const unused = 1;\n  return    2;\n}\n`);
    const eslint = run('npx', ['eslint', 'operators/credit-gate.ts']);
    expect(eslint.status).not.toBe(0);
    expect(eslint.out).toMatch(/'unused' is assigned a value but never used.*@typescript-eslint\/no-unused-vars/);
    const prettier = run('npx', ['prettier', '--check', 'operators/credit-gate.ts']);
    expect(prettier.status).not.toBe(0);
    expect(prettier.out).toMatch(/\[warn\] operators\/credit-gate\.ts/);
  }, 120_000);
});
