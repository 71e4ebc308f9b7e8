/**
 * A deliberately small second model family, written only against omnirx's public entry points: text-to-image with a
 * hashed bag-of-words text embedding (no tokenizer, no encoder network), a pixel-space patch-MLP flow-matching
 * denoiser stepped one grant at a time, and a colour decoder, each read from its own `.toyw` weights file. Registered
 * under `model.json`'s `family: "toy-image"`; it runs in process and on Encode / Denoise / Decode stages.
 */
import { defineFamily, type FamilyDefinition, type ModelFamily } from 'omnirx/families';
import { resolveToyParams, toyClaim, toyWork } from './admission';
import { ToyImageModel } from './model';
import { toyPipeline, ToyState } from './pipeline';
import { parseToySpec, TOY_FAMILY, type ToySpec } from './spec';
import { toyStages } from './stages';

/** The family as its author writes it (no `module`: see `toyImageFamilyAt`). */
export const toyImageDefinition: FamilyDefinition<ToyImageModel, ToySpec, ToyState> = {
  name: TOY_FAMILY,
  tasks: ['T2I'],
  parseSpec: parseToySpec,
  load: (_native, dir, spec, components) => ToyImageModel.load(dir, spec, components),
  pipeline: toyPipeline,
  createState: () => new ToyState(),
  resolve: resolveToyParams,
  claim: toyClaim,
  work: toyWork,
  stages: toyStages,
};

/** The family, in process only. */
export const family: ModelFamily = defineFamily(toyImageDefinition);

/** The family, loadable by stage processes from `module` (the compiled form of this file, whose export `family` it is). */
export function toyImageFamilyAt(module: string): ModelFamily {
  return defineFamily({ ...toyImageDefinition, module });
}

export { ToyImageModel } from './model';
export { parseToySpec, TOY_FAMILY, type ToySpec } from './spec';
export { toySpec, writeToyModel } from './seeded';
export { TOY_PAYLOAD } from './stages';
