import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { OmniError } from '../../errors';
import type { NativeBinding } from '../../native/binding';
import { ModelSpecSchema, type ModelSpec } from '../model-spec';
import { T5Encoder, t5Params } from '../t5/encoder';
import { TokenizerFileSchema, WordByteTokenizer } from '../t5/tokenizer';
import { VaeDecoder, vaeDecoderParams } from '../vae/decoder';
import { WeightStore } from '../weights/weight-store';
import { WanDiT, wanDiTParams } from './dit';

async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: not valid JSON (${(e as Error).message})`);
  }
}

/** Reads and validates `model.json` of a model directory. */
export async function readModelSpec(dir: string): Promise<ModelSpec> {
  const file = path.join(dir, 'model.json');
  const parsed = ModelSpecSchema.safeParse(await readJson(file));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${file}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * A loaded Wan-style text-to-video model: tokenizer, T5-style text encoder, DiT and VAE decoder, each with its
 * weights in native memory. Components are shared by every request on the engine; `dispose` frees them.
 */
export class WanT2VModel {
  private constructor(
    readonly spec: ModelSpec,
    readonly tokenizer: WordByteTokenizer,
    readonly textEncoder: T5Encoder,
    readonly transformer: WanDiT,
    readonly vae: VaeDecoder,
    private readonly stores: WeightStore[],
  ) {}

  /**
   * Loads the model in `dir`.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD for a missing/invalid file or a tensor that does not match the config;
   *   SafetensorsError for a malformed weights file.
   */
  static async load(native: NativeBinding, dir: string): Promise<WanT2VModel> {
    const spec = await readModelSpec(dir);
    const tokFile = path.join(dir, 'tokenizer.json');
    const tok = TokenizerFileSchema.safeParse(await readJson(tokFile));
    if (!tok.success) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${tokFile}: ${tok.error.issues[0].message}`);
    const tokenizer = new WordByteTokenizer(tok.data);
    if (tokenizer.vocabSize !== spec.textEncoder.vocabSize) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${tokFile}: ${tokenizer.vocabSize} ids, but textEncoder.vocabSize is ${spec.textEncoder.vocabSize}`);
    }
    if (spec.transformer.textDim !== spec.textEncoder.dModel) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${dir}/model.json: transformer.textDim ${spec.transformer.textDim} ≠ textEncoder.dModel ${spec.textEncoder.dModel}`);
    }
    if (spec.transformer.inChannels !== spec.vae.zDim || spec.transformer.outChannels !== spec.vae.zDim) {
      throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${dir}/model.json: transformer in/out channels must equal vae.zDim ${spec.vae.zDim}`);
    }
    const stores: WeightStore[] = [];
    try {
      const te = await WeightStore.open(native, path.join(dir, 'text_encoder.safetensors'), t5Params(spec.textEncoder));
      stores.push(te);
      const tr = await WeightStore.open(native, path.join(dir, 'transformer.safetensors'), wanDiTParams(spec.transformer));
      stores.push(tr);
      const va = await WeightStore.open(native, path.join(dir, 'vae.safetensors'), vaeDecoderParams(spec.vae));
      stores.push(va);
      return new WanT2VModel(spec, tokenizer, new T5Encoder(native, spec.textEncoder, te), new WanDiT(native, spec.transformer, tr), new VaeDecoder(native, spec.vae, va), stores);
    } catch (e) {
      for (const s of stores) s.dispose();
      throw e;
    }
  }

  /** Pixels per latent cell times the DiT's spatial patch: width and height must be multiples of it. */
  get pixelStride(): number {
    return this.vae.scaleFactor * this.transformer.spatialStride;
  }

  dispose(): void {
    this.textEncoder.dispose();
    this.transformer.dispose();
    this.vae.dispose();
    for (const s of this.stores) s.dispose();
  }
}
