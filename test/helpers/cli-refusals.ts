/**
 * The refusal tests the training commands (tools/train/train.py, tools/train/recipe.py) share: a bad flag exits 2
 * with a message naming it and writes nothing, and an `--out` that is a file is refused and left as it was.
 */
import { SpawnSyncReturns } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { scratchDir } from './train-python';

/** One refusal: its test name, the flags after `--out DIR`, and what stderr must match. */
export type Refusal = [name: string, args: string[], message: RegExp];

/** Declares, in the enclosing `describe`, one test per case (exit 2, stderr matching, `--out` not created) and one for
 * an `--out` that is a file (run with `fileArgs` after it: exit 2, "--out must be a directory; … is a file", the file
 * unchanged). `run` runs the command with the given arguments. */
export function itRefuses(run: (args: string[]) => SpawnSyncReturns<string>, cases: Refusal[], fileArgs: string[]): void {
  const scratch = () => scratchDir('cli');
  it.each(cases)('%s', (_name, args, message) => {
    const out = path.join(scratch(), 'model');
    const r = run(['--out', out, ...args]);
    expect(r.stderr).toMatch(message);
    expect(r.status).toBe(2);
    expect(() => readdirSync(out)).toThrow(/ENOENT/);
  });

  it('an --out that is a file', () => {
    const file = path.join(scratch(), 'taken');
    writeFileSync(file, 'keep');
    const r = run(['--out', file, ...fileArgs]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--out must be a directory; .*taken is a file/);
    expect(readFileSync(file, 'utf8')).toBe('keep');
  });
}
