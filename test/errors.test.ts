import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';

import { failureEvent } from '../src/engine/events';
import { ERROR_CATALOGUE, OmniError, withoutServerPaths, type ErrorCode } from '../src/errors';
import { toHttpError } from '../transports/shared/errors';

const ROOT = path.resolve(__dirname, '..');
const SRC = path.join(ROOT, 'src');
const TRANSPORTS = path.join(ROOT, 'transports');
const DOC = path.join(ROOT, 'docs', 'errors.md');

interface DocRow {
  code: string;
  status: number;
  meaning: string;
  line: number;
}

/** The rows of the `| code | status | meaning |` table in docs/errors.md. */
function docTable(): DocRow[] {
  const lines = readFileSync(DOC, 'utf8').split(/\r?\n/);
  const header = lines.findIndex((l) => /^\|\s*code\s*\|\s*status\s*\|\s*meaning\s*\|\s*$/.test(l));
  if (header < 0) throw new Error('docs/errors.md has no "| code | status | meaning |" table');
  if (!/^\|(\s*:?-{3,}:?\s*\|){3}\s*$/.test(lines[header + 1] ?? '')) throw new Error('the table header is not followed by a separator row');
  const rows: DocRow[] = [];
  for (let i = header + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
    const cells = lines[i]!.replace(/^\|/, '')
      .replace(/\|\s*$/, '')
      .split('|')
      .map((c) => c.trim());
    if (cells.length < 3) throw new Error(`docs/errors.md line ${i + 1}: expected 3 cells, got ${cells.length}`);
    const [code, status, ...meaning] = cells as [string, string, ...string[]];
    rows.push({ code: code.replace(/^`(.*)`$/, '$1'), status: Number(status), meaning: meaning.join('|').trim(), line: i + 1 });
  }
  return rows;
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name);
    return d.isDirectory() ? filesUnder(p) : d.isFile() ? [p] : [];
  });
}

/** `'OMNIRX_ERR_…'` string literals (any quote style) in the files under src/ and transports/, with where they occur. */
function codeLiteralsInSrc(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of [...filesUnder(SRC), ...filesUnder(TRANSPORTS)]) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(['"`])(OMNIRX_ERR_[A-Z0-9_]+)\1/g)) {
      const line = text.slice(0, m.index).split('\n').length;
      const at = `${path.relative(ROOT, file)}:${line}`;
      found.set(m[2]!, [...(found.get(m[2]!) ?? []), at]);
    }
  }
  return found;
}

const CATALOGUE_CODES = Object.keys(ERROR_CATALOGUE).sort();

describe('docs/errors.md', () => {
  const rows = docTable();

  it('lists every catalogue code exactly once, and nothing else', () => {
    const codes = rows.map((r) => r.code);
    expect(codes.filter((c, i) => codes.indexOf(c) !== i)).toEqual([]);
    expect([...codes].sort()).toEqual(CATALOGUE_CODES);
  });

  it('gives each code the status of the catalogue', () => {
    const docStatuses = Object.fromEntries(rows.map((r) => [r.code, r.status]));
    const catalogueStatuses = Object.fromEntries(Object.entries(ERROR_CATALOGUE).map(([code, e]) => [code, e.status]));
    expect(docStatuses).toEqual(catalogueStatuses);
  });

  it('gives each code a meaning', () => {
    for (const r of rows) expect({ code: r.code, meaningLength: r.meaning.length > 10 }).toEqual({ code: r.code, meaningLength: true });
  });
});

describe('ERROR_CATALOGUE', () => {
  it('has well-formed codes, HTTP statuses and meanings', () => {
    for (const [code, e] of Object.entries(ERROR_CATALOGUE)) {
      expect(code).toMatch(/^OMNIRX_ERR_[A-Z0-9_]+$/);
      expect([400, 404, 409, 410, 413, 422, 429, 500, 503]).toContain(e.status);
      expect(e.meaning.length).toBeGreaterThan(10);
    }
  });

  it('contains every OMNIRX_ERR_ string literal used under src/ and transports/', () => {
    const used = codeLiteralsInSrc();
    // The scan works: it finds codes raised far from src/errors.ts, e.g. by SafetensorsError.
    expect(used.has('OMNIRX_ERR_SAFETENSORS')).toBe(true);
    expect(used.has('OMNIRX_ERR_NATIVE')).toBe(true);
    const unknown = [...used].filter(([code]) => !(code in ERROR_CATALOGUE)).map(([code, at]) => `${code} at ${at.join(', ')}`);
    expect(unknown).toEqual([]);
  });

  it('has no dead code: every catalogue code is used under src/ or transports/ outside src/errors.ts', () => {
    const used = codeLiteralsInSrc();
    const outside = new Set([...used].filter(([, at]) => at.some((a) => !a.startsWith(path.join('src', 'errors.ts')))).map(([code]) => code));
    expect(CATALOGUE_CODES.filter((c) => !outside.has(c))).toEqual([]);
  });
});

describe('OmniError', () => {
  it.each(CATALOGUE_CODES as ErrorCode[])('%s carries the catalogue status', (code) => {
    const e = new OmniError(code, 'm', { param: 'diffusion.width' });
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.status).toBe(ERROR_CATALOGUE[code].status);
    expect(e.param).toBe('diffusion.width');
  });

  it('keeps the cause and leaves param undefined when not given', () => {
    const cause = new Error('inner');
    const e = new OmniError('OMNIRX_ERR_NATIVE', 'outer', { cause });
    expect(e.cause).toBe(cause);
    expect(e.param).toBeUndefined();
    expect(new OmniError('OMNIRX_ERR_NATIVE', 'no cause').cause).toBeUndefined();
  });

  it('becomes an error event with its code and param', () => {
    expect(failureEvent('r1', new OmniError('OMNIRX_ERR_UNKNOWN_MODEL', 'no such model', { param: 'model' }))).toEqual({
      type: 'error',
      requestId: 'r1',
      code: 'OMNIRX_ERR_UNKNOWN_MODEL',
      message: 'no such model',
      param: 'model',
    });
  });

  it('maps a coded foreign error by its code, and an uncoded one to OMNIRX_ERR_INTERNAL', () => {
    const coded = Object.assign(new Error('bad header'), { code: 'OMNIRX_ERR_SAFETENSORS' });
    expect(failureEvent('r1', coded).code).toBe('OMNIRX_ERR_SAFETENSORS');
    expect(failureEvent('r1', new Error('boom')).code).toBe('OMNIRX_ERR_INTERNAL');
    expect(failureEvent('r1', 'a string').message).toBe('a string');
  });
});

describe('withoutServerPaths', () => {
  const enoent = "ENOENT: no such file or directory, open '/srv/omnirx/models/tiny/vae.safetensors'";

  it('shortens every absolute path to its last segment and leaves other slashes alone', () => {
    expect(withoutServerPaths(enoent)).toBe("ENOENT: no such file or directory, open '…/vae.safetensors'");
    expect(withoutServerPaths('/tmp/a/b.mp4 and (/etc/passwd) or x=/home/u/.cache/f')).toBe('…/b.mp4 and (…/passwd) or x=…/f');
    expect(withoutServerPaths('T2V/T2I, 64/8 frames, up/down')).toBe('T2V/T2I, 64/8 frames, up/down');
  });

  it('keeps server paths out of the event of an unexpected error, and out of a 500 body', () => {
    const err = Object.assign(new Error(enoent), { code: 'ENOENT' });
    expect(failureEvent('r1', err)).toMatchObject({ code: 'OMNIRX_ERR_INTERNAL', message: "ENOENT: no such file or directory, open '…/vae.safetensors'" });
    expect(toHttpError(err).body().error).toMatchObject({
      code: 'internal',
      message: "internal error: ENOENT: no such file or directory, open '…/vae.safetensors'",
    });
  });
});
