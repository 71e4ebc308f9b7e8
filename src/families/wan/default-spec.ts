import type { TokenizerFile } from '../../models/t5/tokenizer';
import type { ModelSpec } from './model-spec';
import { ACTION_KEYS } from '../../request/action';

/** Words of the embedded default's tokenizer: the prompt grammar of simple top-down scenes, plus glue words. */
export const DEFAULT_WORDS: readonly string[] = [
  'a',
  'an',
  'the',
  'one',
  'two',
  'three',
  'four',
  'five',
  'with',
  'in',
  'on',
  'and',
  'of',
  'at',
  'to',
  'is',
  'it',
  'its',
  'red',
  'green',
  'blue',
  'yellow',
  'orange',
  'purple',
  'pink',
  'white',
  'black',
  'gray',
  'grey',
  'cyan',
  'magenta',
  'brown',
  'dark',
  'light',
  'bright',
  'pale',
  'deep',
  'ball',
  'balls',
  'cube',
  'cubes',
  'block',
  'blocks',
  'box',
  'boxes',
  'square',
  'squares',
  'dot',
  'agent',
  'circle',
  'disc',
  'room',
  'floor',
  'wall',
  'walls',
  'corner',
  'obstacle',
  'obstacles',
  'world',
  'scene',
  'top',
  'down',
  'view',
  'moving',
  'moves',
  'rolling',
  'rolls',
  'bouncing',
  'bounces',
  'left',
  'right',
  'up',
  'stops',
  'still',
  'slowly',
  'quickly',
  'small',
  'large',
  'big',
  'tiny',
  'empty',
  'video',
  'image',
  'picture',
  'photo',
];

/** The tokenizer file of the embedded default. */
export const DEFAULT_TOKENIZER: TokenizerFile = Object.freeze({ type: 'word-bytes' as const, words: [...DEFAULT_WORDS] });

/**
 * Architecture and defaults of the embedded default model (`omnirx-default`): a 64×64 Wan-style text-to-video
 * model small enough to run on a 2-core CPU, with a per-frame action module (`ACTION_KEYS` none, up, down, left,
 * right and a 2-vector; see src/request/action.ts) so world-model sessions can drive it. This is the architecture
 * before training (`weights: 'seeded'`, unit VAE statistics): tools/train/recipe.py (three tools/train/train.py runs and a weighted average)
 * trains it and writes the shipped `models/omnirx-default/model.json` (`weights: 'trained'`, measured VAE latent
 * mean/std), and
 * tools/train/check-model-dir.ts (also a unit test) checks that the two architectures agree.
 */
export function defaultModelSpec(): ModelSpec {
  const dim = 256;
  return {
    id: 'omnirx-default',
    family: 'wan-t2v',
    description:
      'Embedded default: Wan-2.1-style DiT (dim 256, 6 layers, 5-key + 2-vector per-frame action module), T5-style text encoder (2 layers), causal conv VAE (4x spatial, 16 latent channels). Untrained architecture; the shipped weights are trained by tools/train.',
    weights: 'seeded',
    textEncoder: {
      vocabSize: 259 + DEFAULT_WORDS.length,
      dModel: dim,
      dKv: 64,
      numHeads: 4,
      dFf: 512,
      numLayers: 2,
      relativeAttentionNumBuckets: 32,
      relativeAttentionMaxDistance: 128,
      eps: 1e-6,
      maxLength: 32,
    },
    transformer: {
      patchSize: [1, 2, 2],
      inChannels: 16,
      outChannels: 16,
      dim,
      ffnDim: 1024,
      numHeads: 4,
      numLayers: 6,
      textDim: dim,
      freqDim: 256,
      eps: 1e-6,
      ropeTheta: 10000,
      action: { numKeys: ACTION_KEYS.length, vectorDim: 2 },
    },
    vae: { zDim: 16, channels: [64, 32, 16], numResBlocks: 1, temporalKernel: 3, latentsMean: new Array(16).fill(0), latentsStd: new Array(16).fill(1) },
    // guidance 3 on the first 3 of 20 steps since 2026-12-07 (2 on every step from 2026-12-02, 5 before): the trained
    // weights draw one agent in more T2V frames, paired on the held-out prompts and on npm start's prompt, with 17 fewer
    // DiT forwards a clip (docs/model-card.md, "Guidance interval"; "Guidance scale" for 5 → 2); world sessions re-noise
    // each Euler step with fresh noise (η 1) since the same evening: they follow actions and keep one agent more often,
    // while T2V stays at η 0, where η stops the agent moving (docs/model-card.md, "Stochastic sampling")
    defaults: {
      width: 64,
      height: 64,
      numFrames: 16,
      fps: 8,
      numInferenceSteps: 20,
      guidanceScale: 3,
      guidanceInterval: [0, 0.15],
      flowShift: 3,
      world: { eta: 1 },
    },
  };
}
