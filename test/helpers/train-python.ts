/**
 * Runs the training recipe (tools/train) with Debian's PyTorch for its tests: Python code against its modules, and
 * its commands (train.py, recipe.py) as a user runs them.
 */
import { spawnSync, SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseSafetensors, SafetensorsFile } from '../../src/models/weights/safetensors';

/** The repository root (commands run there). */
export const ROOT = path.resolve(__dirname, '..', '..');
/** Debian's interpreter, which has torch (a `python3` earlier on PATH may not). */
export const PYTHON = '/usr/bin/python3';
/** The built model-directory check (tools/train/check-model-dir.ts). */
export const CHECK_MODEL_DIR = path.join(ROOT, 'dist', 'tools', 'train', 'check-model-dir.js');
/** The weights files of a model directory the recipe writes. */
export const SAFETENSORS = ['text_encoder.safetensors', 'transformer.safetensors', 'vae.safetensors'];

/** Runs `tools/train/<script>` with `args` in the repository root (at most 300 s; status null past that). */
export function runTrainScript(script: 'train.py' | 'recipe.py' | 'average_weights.py', args: string[]): SpawnSyncReturns<string> {
  return spawnSync(PYTHON, [path.join(ROOT, 'tools', 'train', script), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
}

/** The weights file `file` of model directory `dir`, parsed by the runtime's safetensors reader. */
export function readModelFile(dir: string, file: string): SafetensorsFile {
  return parseSafetensors(readFileSync(path.join(dir, file)), file);
}

/** A fresh empty directory under the OS temp folder, named `omnirx-<prefix>-…`. */
export function scratchDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `omnirx-${prefix}-`));
}

/** Runs `code` in the repository root with tools/train on the path and returns its stdout parsed as JSON. Throws
 * Error (with the exit status and stderr) when Python fails, or SyntaxError when stdout is not JSON. */
export function trainPython(code: string): any {
  const r = spawnSync(PYTHON, ['-c', `import sys; sys.path.insert(0, 'tools/train')\n${code}`], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`python failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}
