import { readFile, writeFile } from 'node:fs/promises';
import { OmniError } from 'omnirx';

/**
 * The toy-image weights format (`.toyw`), one file per component:
 *
 *   bytes 0–3   ASCII `TOYW`
 *   bytes 4–7   uint32 LE format version (1)
 *   bytes 8–11  uint32 LE header length H
 *   H bytes     UTF-8 JSON header `{"component": name, "tensors": [{"name", "shape"}, …]}`, space-padded so the data
 *               starts at a multiple of 4
 *   then        the tensors' float32 LE elements, concatenated in header order (nothing after them)
 */
const MAGIC = 'TOYW';
const VERSION = 1;

export type ToyTensors = Record<string, Float32Array>;

/** Serialises `tensors` (in their key order) as a `.toyw` file of `component`. */
export function encodeToyWeights(component: string, tensors: Record<string, { shape: number[]; data: Float32Array }>): Buffer {
  const entries = Object.entries(tensors);
  let header = Buffer.from(JSON.stringify({ component, tensors: entries.map(([name, t]) => ({ name, shape: t.shape })) }), 'utf8');
  const pad = (4 - ((12 + header.length) % 4)) % 4;
  header = Buffer.concat([header, Buffer.alloc(pad, 0x20)]);
  const prefix = Buffer.alloc(12);
  prefix.write(MAGIC, 0, 'ascii');
  prefix.writeUInt32LE(VERSION, 4);
  prefix.writeUInt32LE(header.length, 8);
  const data = entries.map(([, t]) => {
    const b = Buffer.alloc(t.data.length * 4);
    for (let i = 0; i < t.data.length; i++) b.writeFloatLE(t.data[i], i * 4);
    return b;
  });
  return Buffer.concat([prefix, header, ...data]);
}

export async function writeToyWeights(file: string, component: string, tensors: Record<string, { shape: number[]; data: Float32Array }>): Promise<void> {
  await writeFile(file, encodeToyWeights(component, tensors));
}

/**
 * Reads `file` as the weights of `component`, checking it holds exactly the tensors `expected` names, with those
 * shapes.
 * @throws OmniError OMNIRX_ERR_MODEL_LOAD naming the file (and the tensor) for a missing, malformed or mismatched file.
 */
export async function readToyWeights(file: string, component: string, expected: Record<string, number[]>): Promise<ToyTensors> {
  const fail = (why: string): never => {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${why}`);
  };
  let buf: Buffer;
  try {
    buf = await readFile(file);
  } catch (e) {
    return fail((e as Error).message);
  }
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== MAGIC) fail(`not a ${MAGIC} weights file`);
  if (buf.readUInt32LE(4) !== VERSION) fail(`format version ${buf.readUInt32LE(4)}, this family reads ${VERSION}`);
  const headerLength = buf.readUInt32LE(8);
  if (12 + headerLength > buf.length) fail(`header of ${headerLength} bytes runs past the end of the file`);
  let header: { component?: unknown; tensors?: unknown };
  try {
    header = JSON.parse(buf.toString('utf8', 12, 12 + headerLength)) as typeof header;
  } catch (e) {
    return fail(`header is not JSON (${(e as Error).message})`);
  }
  if (header.component !== component) fail(`holds component '${String(header.component)}', expected '${component}'`);
  const list = Array.isArray(header.tensors) ? (header.tensors as Array<{ name?: unknown; shape?: unknown }>) : fail('header.tensors is not a list');
  const names = list.map((t) => String(t.name));
  const want = Object.keys(expected);
  if (names.length !== want.length || want.some((n) => !names.includes(n))) fail(`holds tensors [${names.join(', ')}], expected [${want.join(', ')}]`);
  const out: ToyTensors = {};
  let offset = 12 + headerLength;
  if (offset % 4 !== 0) fail('tensor data does not start at a multiple of 4 bytes');
  for (const t of list) {
    const name = String(t.name);
    const shape = expected[name];
    if (!Array.isArray(t.shape) || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      fail(`tensor '${name}' has shape ${JSON.stringify(t.shape)}, expected [${shape.join(', ')}]`);
    }
    const n = shape.reduce((a, d) => a * d, 1);
    if (offset + 4 * n > buf.length) fail(`tensor '${name}' runs past the end of the file`);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = buf.readFloatLE(offset + 4 * i);
    if (data.some((v) => !Number.isFinite(v))) fail(`tensor '${name}' holds a non-finite value`);
    out[name] = data;
    offset += 4 * n;
  }
  if (offset !== buf.length) fail(`${buf.length - offset} bytes after the last tensor`);
  return out;
}
