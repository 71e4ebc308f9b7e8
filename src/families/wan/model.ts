import { OmniError } from '../../errors';
import type { NativeBinding } from '../../native/binding';
import { readJsonFile } from '../../pipeline/family/catalog';
import type { LoadedModel, ModelLoadOptions } from '../../pipeline/family/model';
import { parseWanSpec, type ModelSpec } from './model-spec';
import { T5Encoder, t5Params } from '../../models/t5/encoder';
import { TokenizerFileSchema, WordByteTokenizer } from '../../models/t5/tokenizer';
import { VaeDecoder, vaeDecoderParams } from '../../models/vae/decoder';
import { VaeEncoder, vaeEncoderParams } from '../../models/vae/encoder';
import { resolveModelFile } from '../../models/weights/model-file';
import { WeightStore } from '../../models/weights/weight-store';
import { CausalWanDiT, type CausalRolloutConfig } from '../../models/wan/causal-dit';
import { WanDiT, wanDiTParams } from '../../models/wan/dit';

/** Component names of the Wan T2V family (the pipeline spec declares which tasks need each). */
export const WAN_COMPONENTS = ['tokenizer', 'text_encoder', 'transformer', 'transformer_2', 'vae', 'vae_encoder'] as const;
export type WanComponent = (typeof WAN_COMPONENTS)[number];

/**
 * A loaded Wan-style text-to-video model. Only the components a deployment needs are constructed and loaded
 * (`components`); asking for another one is an error. Components are shared by every request on the engine;
 * `dispose` frees them.
 */
export class WanT2VModel implements LoadedModel {
  private constructor(
    readonly spec: ModelSpec,
    private readonly parts: {
      tokenizer?: WordByteTokenizer;
      textEncoder?: T5Encoder;
      transformers: Map<string, { dit: WanDiT; weights: WeightStore }>;
      vae?: VaeDecoder;
      vaeEncoder?: VaeEncoder;
    },
    private readonly native: NativeBinding,
    private readonly stores: WeightStore[],
    /** Native bytes of the loaded weights per component. */
    readonly weightBytes: Readonly<Record<string, number>>,
  ) {}

  /**
   * Loads the model in `dir` (its `spec`, validated by `parseWanSpec`), constructing only `components` (default: all
   * the directory provides but the VAE encoder), with the DiTs' matrix products (linears, attention) in
   * `opts.matmulDtype` (default float32).
   * Every file is opened through `resolveModelFile` (refused when it resolves outside `dir`) and named in errors by
   * the model's id and its path relative to the models folder; each weights file is checked by `WeightStore.open`.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD for a missing/invalid file, a file that resolves outside `dir`, or a tensor
   *   that is missing or whose dtype, shape or values (NaN, ±Infinity) do not fit the config; SafetensorsError for a
   *   malformed weights file.
   */
  static async load(native: NativeBinding, dir: string, spec: ModelSpec, components?: ReadonlySet<string>, opts: ModelLoadOptions = {}): Promise<WanT2VModel> {
    const want = (c: WanComponent) =>
      components === undefined ? (c !== 'transformer_2' || spec.transformer_2 !== undefined) && c !== 'vae_encoder' : components.has(c);
    let tokenizer: WordByteTokenizer | undefined;
    if (want('tokenizer') || want('text_encoder')) {
      const tokFile = await resolveModelFile(dir, 'tokenizer.json', spec.id);
      const tok = TokenizerFileSchema.safeParse(await readJsonFile(tokFile));
      if (!tok.success) throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `${tokFile.label}: ${tok.error.issues[0].message}`);
      tokenizer = new WordByteTokenizer(tok.data);
      if (tokenizer.vocabSize !== spec.textEncoder.vocabSize) {
        throw new OmniError(
          'OMNIRX_ERR_MODEL_LOAD',
          `${tokFile.label}: ${tokenizer.vocabSize} ids, but textEncoder.vocabSize is ${spec.textEncoder.vocabSize}`,
        );
      }
    }
    const stores: WeightStore[] = [];
    const bytes: Record<string, number> = {};
    const open = async (name: string, params: Parameters<typeof WeightStore.open>[2]) => {
      const file = await resolveModelFile(dir, name, spec.id);
      const st = await WeightStore.open(native, file.path, params, file.label);
      stores.push(st);
      return st;
    };
    try {
      let textEncoder: T5Encoder | undefined;
      if (want('text_encoder')) {
        const st = await open('text_encoder.safetensors', t5Params(spec.textEncoder));
        textEncoder = new T5Encoder(native, spec.textEncoder, st);
        bytes.text_encoder = st.bytes;
      }
      const transformers = new Map<string, { dit: WanDiT; weights: WeightStore }>();
      for (const name of ['transformer', 'transformer_2'] as const) {
        if (!want(name)) continue;
        const config = name === 'transformer' ? spec.transformer : spec.transformer_2;
        if (config === undefined)
          throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `model '${spec.id}': the deployment needs '${name}' but its model.json has no ${name} config`);
        const st = await open(`${name}.safetensors`, wanDiTParams(config));
        transformers.set(name, { dit: new WanDiT(native, config, st, opts.matmulDtype), weights: st });
        bytes[name] = st.bytes;
      }
      let vae: VaeDecoder | undefined;
      if (want('vae')) {
        const st = await open('vae.safetensors', vaeDecoderParams(spec.vae));
        vae = new VaeDecoder(native, spec.vae, st);
        bytes.vae = st.bytes;
      }
      let vaeEncoder: VaeEncoder | undefined;
      if (want('vae_encoder')) {
        const st = await open('vae.safetensors', vaeEncoderParams(spec.vae));
        vaeEncoder = new VaeEncoder(native, spec.vae, st);
        bytes.vae_encoder = st.bytes;
      }
      return new WanT2VModel(spec, { tokenizer, textEncoder, transformers, vae, vaeEncoder }, native, stores, bytes);
    } catch (e) {
      for (const s of stores) s.dispose();
      throw e;
    }
  }

  /**
   * Reads and validates `dir/model.json` (`parseWanSpec`), then loads the model as `load` does; for tools and tests
   * that open a Wan model directory without a catalogue.
   * @throws OmniError OMNIRX_ERR_MODEL_LOAD as `parseWanSpec` and `load` do.
   */
  static async fromDirectory(native: NativeBinding, dir: string, components?: ReadonlySet<string>, opts: ModelLoadOptions = {}): Promise<WanT2VModel> {
    const file = await resolveModelFile(dir, 'model.json');
    return WanT2VModel.load(native, dir, parseWanSpec(await readJsonFile(file), file.label), components, opts);
  }

  private missing(name: string): never {
    throw new OmniError('OMNIRX_ERR_MODEL_LOAD', `model '${this.spec.id}': component '${name}' is not loaded in this deployment`);
  }

  get tokenizer(): WordByteTokenizer {
    return this.parts.tokenizer ?? this.missing('tokenizer');
  }

  get textEncoder(): T5Encoder {
    return this.parts.textEncoder ?? this.missing('text_encoder');
  }

  get vae(): VaeDecoder {
    return this.parts.vae ?? this.missing('vae');
  }

  /** The VAE encoder (image-to-world: the first frame's latents); loaded only when a deployed task needs it. */
  get vaeEncoder(): VaeEncoder {
    return this.parts.vaeEncoder ?? this.missing('vae_encoder');
  }

  /** The DiT named `name` ('transformer' or 'transformer_2'). */
  transformer(name = 'transformer'): WanDiT {
    return (this.parts.transformers.get(name) ?? this.missing(name)).dit;
  }

  /**
   * A new block-causal rollout over the weights of DiT `name` (shared, not copied): its own KV cache, staging
   * tensors and plans, for one session. The caller disposes it.
   * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE for a rollout geometry the DiT cannot run (see `CausalWanDiT`).
   */
  causalTransformer(rollout: CausalRolloutConfig, name = 'transformer'): CausalWanDiT {
    const t = this.parts.transformers.get(name) ?? this.missing(name);
    return new CausalWanDiT(this.native, t.dit.config, t.weights, rollout, t.dit.matmulDtype);
  }

  /** Names of the loaded components. */
  get loadedComponents(): readonly string[] {
    const p = this.parts;
    return [
      ...(p.tokenizer ? ['tokenizer'] : []),
      ...(p.textEncoder ? ['text_encoder'] : []),
      ...p.transformers.keys(),
      ...(p.vae ? ['vae'] : []),
      ...(p.vaeEncoder ? ['vae_encoder'] : []),
    ];
  }

  dispose(): void {
    this.parts.textEncoder?.dispose();
    for (const t of this.parts.transformers.values()) t.dit.dispose();
    this.parts.vae?.dispose();
    this.parts.vaeEncoder?.dispose();
    for (const s of this.stores) s.dispose();
  }
}
