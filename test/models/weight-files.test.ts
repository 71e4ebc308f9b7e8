/**
 * Hostile weight files in a models folder: non-finite values, reshaped tensors, wrong dtypes, files that are not
 * safetensors, and symlinks out of the model's folder. Each is refused at load with a message naming the model, the
 * file relative to the models folder and the tensor — and never the server's absolute paths or the file's bytes.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import { loadNative } from '../../src/native/binding';
import { ModelCatalog } from '../../src/pipeline/family/catalog';
import { ModelLoader } from '../../src/pipeline/family/loader';
import { FamilyRegistry } from '../../src/pipeline/family/registry';
import { parseSafetensors, serializeSafetensors, type SafetensorsDtype } from '../../src/models/weights/safetensors';
import { makeModelsDir } from '../helpers/tiny-model';

const native = loadNative();
const COMPONENTS = new Set(['tokenizer', 'text_encoder', 'transformer', 'vae', 'vae_encoder']);

type Tensors = Record<string, { shape: number[]; data: Float32Array; dtype: SafetensorsDtype }>;

/** Rewrites the safetensors file `file` after `edit` changed its tensors (each kept in its dtype unless edited). */
function rewrite(file: string, edit: (t: Tensors) => void): void {
  const parsed = parseSafetensors(readFileSync(file));
  const tensors: Tensors = {};
  for (const e of parsed.entries) tensors[e.name] = { shape: e.shape, data: parsed.float32(e.name), dtype: e.dtype };
  edit(tensors);
  writeFileSync(file, serializeSafetensors(tensors));
}

/** The error loading model `id` of `modelsDir` throws (every component a deployment may need). */
async function loadError(modelsDir: string, id = 'tiny'): Promise<{ code: string; message: string }> {
  const loader = new ModelLoader(native, new ModelCatalog(modelsDir, id, new FamilyRegistry(builtinFamilies())), () => COMPONENTS);
  try {
    await loader.get(id);
  } catch (e) {
    return e as { code: string; message: string };
  } finally {
    await loader.dispose();
  }
  throw new Error(`model '${id}' loaded`);
}

/** Asserts the message holds no absolute path of this machine. */
function expectNoServerPath(message: string, modelsDir: string): void {
  expect(message).not.toContain(modelsDir);
  expect(message).not.toContain(tmpdir());
  expect(message).not.toMatch(/(^|[\s'"(])\/(etc|tmp|work|home|srv)\b/);
}

describe('weight values', () => {
  it('refuses +Inf in a VAE weight, naming the model, the file, the tensor and the first bad element', async () => {
    const dir = await makeModelsDir();
    rewrite(path.join(dir, 'tiny', 'vae.safetensors'), (t) => {
      t['decoder.conv_in.weight']!.data[12] = Infinity;
      t['decoder.conv_in.weight']!.data[20] = Number.NaN;
    });
    const err = await loadError(dir);
    expect(err).toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/vae.safetensors: tensor 'decoder.conv_in.weight' has non-finite values (first at element 12: Infinity)",
    });
    expectNoServerPath(err.message, dir);
  });

  it.each<[SafetensorsDtype, number, string]>([
    ['F32', Number.NaN, 'NaN'],
    ['F16', -Infinity, '-Infinity'],
    ['BF16', Number.NaN, 'NaN'],
  ])('refuses a %s tensor holding %s', async (dtype, value, shown) => {
    const dir = await makeModelsDir();
    rewrite(path.join(dir, 'tiny', 'text_encoder.safetensors'), (t) => {
      for (const v of Object.values(t)) v.dtype = dtype;
      t['shared.weight']!.data[3] = value;
    });
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: `model 'tiny': tiny/text_encoder.safetensors: tensor 'shared.weight' has non-finite values (first at element 3: ${shown})`,
    });
  });

  it('fails the request of a model with a non-finite VAE weight instead of completing it with a uniform image', async () => {
    const dir = await makeModelsDir();
    rewrite(path.join(dir, 'tiny', 'vae.safetensors'), (t) => t['decoder.conv_in.weight']!.data.fill(Infinity));
    const engine = await Engine.create({ families: builtinFamilies(), modelsDir: dir, defaultModel: 'tiny' });
    try {
      const events = await lastValueFrom(
        engine.generate({ model: 'tiny', task: 'T2V', inputs: { prompt: 'a red ball' }, diffusion: { seed: 1, numInferenceSteps: 2 } }).pipe(toArray()),
      );
      const last = events[events.length - 1]!;
      expect(last).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_MODEL_LOAD', message: expect.stringContaining("tensor 'decoder.conv_in.weight' has non-finite values") });
      expectNoServerPath((last as { message: string }).message, dir);
    } finally {
      await engine.close();
    }
  });
});

describe('weight shapes and dtypes', () => {
  it('refuses a tensor reshaped to the same element count, naming the expected and the found shape', async () => {
    const dir = await makeModelsDir();
    rewrite(path.join(dir, 'tiny', 'vae.safetensors'), (t) => {
      t['decoder.conv_in.weight']!.shape = [4, 8, 3, 3, 3];
    });
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/vae.safetensors: tensor 'decoder.conv_in.weight' has shape [4, 8, 3, 3, 3]; expected [8, 4, 3, 3, 3]",
    });
  });

  it('names a tensor of a dtype it cannot load by its dtype, not as missing', async () => {
    const dir = await makeModelsDir();
    const file = path.join(dir, 'tiny', 'vae.safetensors');
    const bytes = readFileSync(file);
    // F32 → I32 in the header: same length, same byte size, so the file stays valid safetensors.
    const headerEnd = 8 + Number(bytes.readBigUInt64LE(0));
    const header = bytes.subarray(8, headerEnd).toString('utf8');
    const at = header.indexOf('"dtype":"F32"', header.indexOf('"decoder.conv_in.weight"'));
    bytes.write('"dtype":"I32"', 8 + at, 'utf8');
    writeFileSync(file, bytes);
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/vae.safetensors: tensor 'decoder.conv_in.weight' has dtype I32; expected F32, F16 or BF16",
    });
  });

  it('still names a tensor that is absent as missing, with its expected shape', async () => {
    const dir = await makeModelsDir();
    rewrite(path.join(dir, 'tiny', 'vae.safetensors'), (t) => {
      delete t['decoder.conv_in.bias'];
    });
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/vae.safetensors: missing tensor 'decoder.conv_in.bias' [8]",
    });
  });
});

describe('files that are not safetensors', () => {
  it('does not echo the bytes of a text file put in place of the weights', async () => {
    const dir = await makeModelsDir();
    const text = 'root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n';
    writeFileSync(path.join(dir, 'tiny', 'vae.safetensors'), text);
    const err = await loadError(dir);
    expect(err).toMatchObject({
      code: 'OMNIRX_ERR_SAFETENSORS',
      message: "model 'tiny': tiny/vae.safetensors: not a safetensors file: the header length (bytes 0-7) is over the 100000000-byte cap",
    });
    expect(err.message).not.toContain(Buffer.from(text).readBigUInt64LE(0).toString());
    expectNoServerPath(err.message, dir);
  });

  it('does not echo a header that is not JSON', async () => {
    const dir = await makeModelsDir();
    const header = Buffer.from('root:x:0:0:root:/root:/bin/bash');
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(path.join(dir, 'tiny', 'vae.safetensors'), Buffer.concat([len, header]));
    const err = await loadError(dir);
    expect(err.code).toBe('OMNIRX_ERR_SAFETENSORS');
    expect(err.message).toMatch(/^model 'tiny': tiny\/vae\.safetensors: header \(bytes 8-38\) is not valid JSON/);
    expect(err.message).not.toMatch(/root|bash/);
  });

  it('names a truncated header with its length and the bytes present', async () => {
    const dir = await makeModelsDir();
    const file = path.join(dir, 'tiny', 'vae.safetensors');
    const bytes = readFileSync(file);
    writeFileSync(file, bytes.subarray(0, 40));
    const err = await loadError(dir);
    expect(err).toMatchObject({
      code: 'OMNIRX_ERR_SAFETENSORS',
      message: expect.stringMatching(/^model 'tiny': tiny\/vae\.safetensors: header length \(bytes 0-7\) is \d+ bytes but only 32 bytes follow/),
    });
  });

  it('names a missing weights file relative to the models folder', async () => {
    const dir = await makeModelsDir();
    unlinkSync(path.join(dir, 'tiny', 'vae.safetensors'));
    const err = await loadError(dir);
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_MODEL_LOAD', message: "model 'tiny': tiny/vae.safetensors: missing file" });
  });
});

describe('symlinks', () => {
  it('refuses a weights file symlinked to a system file, without reading it', async () => {
    const dir = await makeModelsDir();
    const file = path.join(dir, 'tiny', 'vae.safetensors');
    unlinkSync(file);
    symlinkSync('/etc/passwd', file);
    const err = await loadError(dir);
    expect(err).toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/vae.safetensors resolves outside the model's folder (symlinked files must stay inside it)",
    });
    expectNoServerPath(err.message, dir);
  });

  it("refuses a valid weights file symlinked from outside the model's folder", async () => {
    const dir = await makeModelsDir();
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'omnirx-blobs-'));
    const file = path.join(dir, 'tiny', 'transformer.safetensors');
    renameSync(file, path.join(elsewhere, 'transformer.safetensors'));
    symlinkSync(path.join(elsewhere, 'transformer.safetensors'), file);
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/transformer.safetensors resolves outside the model's folder (symlinked files must stay inside it)",
    });
  });

  it('refuses a model.json symlinked out of its folder', async () => {
    const dir = await makeModelsDir();
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'omnirx-specs-'));
    const file = path.join(dir, 'tiny', 'model.json');
    renameSync(file, path.join(elsewhere, 'model.json'));
    symlinkSync(path.join(elsewhere, 'model.json'), file);
    await expect(loadError(dir)).resolves.toMatchObject({
      code: 'OMNIRX_ERR_MODEL_LOAD',
      message: "model 'tiny': tiny/model.json resolves outside the model's folder (symlinked files must stay inside it)",
    });
  });

  it("loads files symlinked inside the model's folder, and a model folder symlinked from elsewhere", async () => {
    const elsewhere = await makeModelsDir();
    const model = path.join(elsewhere, 'tiny');
    mkdirSync(path.join(model, 'blobs'));
    renameSync(path.join(model, 'vae.safetensors'), path.join(model, 'blobs', 'vae.safetensors'));
    symlinkSync(path.join('blobs', 'vae.safetensors'), path.join(model, 'vae.safetensors'));
    const dir = mkdtempSync(path.join(tmpdir(), 'omnirx-models-'));
    symlinkSync(model, path.join(dir, 'tiny'));
    const loader = new ModelLoader(native, new ModelCatalog(dir, 'tiny', new FamilyRegistry(builtinFamilies())), () => COMPONENTS);
    try {
      await expect(loader.get('tiny')).resolves.toBeDefined();
    } finally {
      await loader.dispose();
    }
  });
});
