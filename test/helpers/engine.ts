import type { Engine } from '../../src/engine/engine';
import { InProcessExecutor } from '../../src/executor/in-process';
import type { WanT2VModel } from '../../src/families/wan/model';

/** The in-process executor of a monolithic engine (its step scheduler, caches and loaded models). */
export function inProcess(engine: Engine): InProcessExecutor {
  if (!(engine.executor instanceof InProcessExecutor)) throw new Error('the engine does not run in process');
  return engine.executor;
}

/** The Wan model `id` (the default when undefined) as the engine's in-process executor loaded it. */
export async function loadedWan(engine: Engine, id?: string): Promise<WanT2VModel> {
  return (await inProcess(engine).models.get(id)) as WanT2VModel;
}
