/**
 * Jest globalSetup: every test run gets its own temporary root. A fresh `omnirx-test-<pid>-*` directory (pid: this jest
 * process) under the system's temporary directory becomes TMPDIR, so `os.tmpdir()` in the test workers (started after
 * this, with its environment) and the ffmpeg and Python processes the tests spawn create their files inside it;
 * global-teardown.js removes it and restores TMPDIR, so a run that ends normally, passing or failing, leaves nothing
 * behind. Interrupted runs leave nothing either: jest runs this in its own process, where SIGINT (Ctrl-C), SIGTERM and
 * SIGHUP remove the root before the process ends by that signal; and a run killed outright (SIGKILL) leaves a root
 * whose pid is gone, which the next run's setup removes.
 */
const { mkdtempSync, readdirSync, rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const PREFIX = 'omnirx-test-';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Whether process `pid` exists (EPERM: it does, owned by another user). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Removes a run's root; retries while a process still writing into it refills it. */
function remove(root) {
  rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}

/** Removes the `omnirx-test-<pid>-*` roots in `dir` of runs whose jest process is gone (killed before teardown). */
function sweep(dir) {
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^omnirx-test-(\d+)-/.exec(name);
    if (m && Number(m[1]) !== process.pid && !alive(Number(m[1]))) {
      try {
        remove(path.join(dir, name));
      } catch {
        // another user's, or being removed by another run: not ours to insist on
      }
    }
  }
}

/** On an interrupting signal: remove the current root, then end as the signal would have (unless someone else in
 * this process handles it too). Marked, so that teardown (another module) finds it. */
function onSignal(signal) {
  const root = process.env.OMNIRX_TEST_TMP_ROOT;
  if (root && path.basename(root).startsWith(PREFIX)) {
    try {
      remove(root);
    } catch {
      // nothing more to do on the way out
    }
  }
  for (const s of SIGNALS) for (const f of process.listeners(s)) if (f.omnirxTempRoot) process.removeListener(s, f);
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}
onSignal.omnirxTempRoot = true;

module.exports = () => {
  process.env.OMNIRX_TEST_TMPDIR_BEFORE = process.env.TMPDIR ?? '';
  const parent = os.tmpdir();
  sweep(parent);
  const root = mkdtempSync(path.join(parent, `${PREFIX}${process.pid}-`));
  process.env.OMNIRX_TEST_TMP_ROOT = root;
  process.env.TMPDIR = root;
  // once per process: `jest --watch` runs setup again after each teardown
  for (const s of SIGNALS) if (!process.listeners(s).some((f) => f.omnirxTempRoot)) process.on(s, onSignal);
};
