/**
 * `npm run eval:world`'s command line (bench/eval-world.ts, built into dist/ by `npm test`'s pretest): bad flags are
 * refused by name with exit 2 before any model loads, and --help lists the options.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const SCRIPT = path.resolve(__dirname, '..', '..', 'dist', 'bench', 'eval-world.js');
const run = (...args: string[]) => spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8', timeout: 60_000 });

describe('eval:world command line', () => {
  it.each([
    [['--seeds', '0'], /--seeds must be an integer in \[1, 100\]; got "0"/],
    [['--seeds', '101'], /--seeds must be an integer in \[1, 100\]; got "101"/],
    [['--seeds', '1.5'], /--seeds must be an integer in \[1, 100\]; got "1.5"/],
    [['--seeds', 'NaN'], /--seeds must be an integer in \[1, 100\]; got "NaN"/],
    [['--seeds', '1e2'], /--seeds must be an integer in \[1, 100\]; got "1e2"/],
    [['--seeds'], /option '--seeds <k>' argument missing/],
    [['--matmul-dtype', 'fp8'], /--matmul-dtype <dtype>' argument 'fp8' is invalid. Allowed choices are float32, bfloat16/],
    [['--sessions', '4'], /unknown option '--sessions'/],
  ])('refuses %j by name with exit 2', (args, message) => {
    const r = run(...args);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
    expect(r.status).toBe(2);
  });

  it('--help lists every option and exits 0', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    for (const flag of ['--models-dir', '--model', '--strips', '--seeds', '--matmul-dtype']) expect(r.stdout).toContain(flag);
  });
});
