/**
 * Runs Python code against the training recipe's modules (tools/train) with Debian's PyTorch, for the tests of its
 * helpers.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON = '/usr/bin/python3';

/** Runs `code` in the repository root with tools/train on the path and returns its stdout parsed as JSON. Throws
 * Error (with the exit status and stderr) when Python fails, or SyntaxError when stdout is not JSON. */
export function trainPython(code: string): any {
  const r = spawnSync(PYTHON, ['-c', `import sys; sys.path.insert(0, 'tools/train')\n${code}`], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`python failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}
