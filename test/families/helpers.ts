import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { OmniEvent, OmniOutput, OmniRequestInput } from 'omnirx';
import * as ts from 'typescript';
import { makeModelsDir } from '../helpers/tiny-model';
import { toySpec, writeToyModel } from './toy-image';

/** A models folder holding the tiny Wan model (`tiny`) and a toy-image model (`toy`). */
export async function makeMixedModelsDir(): Promise<string> {
  const dir = await makeModelsDir();
  await writeToyModel(path.join(dir, 'toy'), toySpec('toy'), 3);
  return dir;
}

/** The `final` event's output (fails on anything else). */
export function outputOf(events: OmniEvent[]): OmniOutput {
  const last = events[events.length - 1];
  if (last?.type !== 'final') throw new Error(`expected a final event, got ${JSON.stringify(last)}`);
  return last.output;
}

/** The pixels of the `image` artifact of a finished request. */
export function imageOf(events: OmniEvent[]): { width: number; height: number; pixels: Buffer } {
  const a = outputOf(events).artifacts.image;
  if (a?.kind !== 'image') throw new Error('no image artifact');
  return { width: a.width, height: a.height, pixels: Buffer.from(a.pixels) };
}

const REPO = path.resolve(__dirname, '../..');
const SOURCE = path.join(__dirname, 'toy-image');

/**
 * Compiles the toy-image family's TypeScript (each file alone, `transpileModule`) into a fresh directory under the
 * system's temporary directory, beside a `node_modules` holding `omnirx` (a link to this repository, so the family's
 * `omnirx/...` imports resolve through the package's exports to `dist/`) and `zod` (its one other dependency).
 * Returns the compiled `index.js` and a function that removes the directory.
 */
export function compileToyFamily(): { index: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-toy-family-'));
  try {
    const out = path.join(dir, 'toy-image');
    mkdirSync(out);
    for (const f of readdirSync(SOURCE).filter((n) => n.endsWith('.ts'))) {
      const r = ts.transpileModule(readFileSync(path.join(SOURCE, f), 'utf8'), {
        fileName: f,
        reportDiagnostics: true,
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      });
      if (r.diagnostics !== undefined && r.diagnostics.length > 0)
        throw new Error(`${f}: ${ts.flattenDiagnosticMessageText(r.diagnostics[0].messageText, '\n')}`);
      writeFileSync(path.join(out, f.replace(/\.ts$/, '.js')), r.outputText);
    }
    mkdirSync(path.join(dir, 'node_modules'));
    symlinkSync(REPO, path.join(dir, 'node_modules', 'omnirx'), 'dir');
    symlinkSync(path.join(REPO, 'node_modules', 'zod'), path.join(dir, 'node_modules', 'zod'), 'dir');
    return { index: path.join(out, 'index.js'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** Toy-image requests that exercise each path of the family: guided, unguided (no negative embedding) and re-noised. */
export const TOY_REQUESTS: OmniRequestInput[] = [
  { model: 'toy', task: 'T2I', inputs: { prompt: 'a red fox in the snow' }, diffusion: { width: 24, height: 16, seed: 7 } },
  {
    model: 'toy',
    task: 'T2I',
    inputs: { prompt: 'a blue whale at dusk', negativePrompt: 'blurry' },
    diffusion: { seed: 8, guidanceScale: 1, numInferenceSteps: 3 },
  },
  { model: 'toy', task: 'T2I', inputs: { prompt: 'green hills' }, diffusion: { width: 16, height: 32, seed: 9, eta: 0.5, guidanceInterval: [0, 0.5] } },
];
