/**
 * An interrupted test run leaves nothing behind (test/setup/global-setup.js): a jest process stopped by SIGINT
 * (Ctrl-C) or SIGTERM removes its temporary root on the way out and still ends by that signal; one killed by SIGKILL
 * leaves its root, named with its pid, and the next run's setup removes it while keeping the roots of live runs. Each
 * case runs a real jest process over a throwaway project whose one test writes into its root and then waits.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const SETUP = path.join(__dirname, 'global-setup.js');
const TEARDOWN = path.join(__dirname, 'global-teardown.js');
const JEST = require.resolve('jest/bin/jest');

interface Run {
  child: ChildProcess;
  /** The child's TMPDIR, where its setup makes its root. */
  tmp: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

/** Starts jest on a throwaway project (this repository's global setup and teardown, one plain-JS test that writes
 * `started` into os.tmpdir(), its run's root, and then waits a minute), with a TMPDIR of its own. */
function startRun(): Run {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-interrupt-'));
  const tmp = path.join(dir, 'tmp');
  mkdirSync(tmp);
  const config = {
    rootDir: dir,
    testMatch: ['**/wait.test.js'],
    transform: {},
    globalSetup: SETUP,
    globalTeardown: TEARDOWN,
    cacheDirectory: path.join(dir, 'cache'),
    testTimeout: 60_000,
  };
  writeFileSync(path.join(dir, 'jest.config.js'), `module.exports = ${JSON.stringify(config)};\n`);
  writeFileSync(
    path.join(dir, 'wait.test.js'),
    "test('waits', async () => {\n" +
      "  require('node:fs').writeFileSync(require('node:path').join(require('node:os').tmpdir(), 'started'), 'x');\n" +
      '  await new Promise((r) => setTimeout(r, 60000));\n' +
      '});\n',
  );
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  for (const k of ['OMNIRX_TEST_TMP_ROOT', 'OMNIRX_TEST_TMPDIR_BEFORE', 'JEST_WORKER_ID']) delete env[k];
  const child = spawn(process.execPath, [JEST, '--config', path.join(dir, 'jest.config.js'), '--no-watchman', '--ci'], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return { child, tmp, exited };
}

/** The run's root once its test has written into it (polled; fails after 30 s). */
async function rootOnceStarted(run: Run): Promise<string> {
  const name = new RegExp(`^omnirx-test-${run.child.pid}-`);
  for (let t = Date.now(); Date.now() - t < 30_000; await new Promise((r) => setTimeout(r, 25))) {
    const root = readdirSync(run.tmp).find((n) => name.test(n));
    if (root && existsSync(path.join(run.tmp, root, 'started'))) return path.join(run.tmp, root);
    if (run.child.exitCode !== null) break;
  }
  run.child.kill('SIGKILL');
  throw new Error(`jest never started its test in a root under ${run.tmp}: ${(await run.exited).stderr}`);
}

describe('an interrupted test run', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('stopped by %s, removes its root and ends by that signal', async (signal) => {
    const run = startRun();
    const root = await rootOnceStarted(run);
    run.child.kill(signal);
    const { signal: ended, stderr } = await run.exited;
    expect({ ended, stderr: ended === signal ? '' : stderr }).toEqual({ ended: signal, stderr: '' });
    expect(existsSync(root)).toBe(false);
    expect(readdirSync(run.tmp)).toEqual([]);
  });

  it("killed by SIGKILL, leaves a root that the next run's setup removes; roots of live runs and others' directories are kept", async () => {
    const run = startRun();
    const root = await rootOnceStarted(run);
    run.child.kill('SIGKILL');
    await run.exited;
    expect(existsSync(root)).toBe(true);
    // a live run's root (this worker's pid), a root named without a pid, another directory: none is the sweep's
    const keep = [`omnirx-test-${process.pid}-live`, 'omnirx-test-AbC123', 'omnirx-other'];
    for (const k of keep) mkdirSync(path.join(run.tmp, k, 'a'), { recursive: true });
    const next = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(SETUP)})(); require(${JSON.stringify(TEARDOWN)})();`], {
      encoding: 'utf8',
      env: { ...process.env, TMPDIR: run.tmp },
    });
    expect(next.stderr).toBe('');
    expect(existsSync(root)).toBe(false);
    expect(readdirSync(run.tmp).sort()).toEqual([...keep].sort());
  });
});
