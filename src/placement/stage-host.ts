import { StepScheduler } from '../executor/scheduler';
import { ModelRegistry } from '../models/registry';
import type { WanT2VModel } from '../families/wan/model';
import type { NativeBinding } from '../native/binding';
import { buildPipeline } from '../pipeline/spec';
import type { WanT2VContext } from '../families/wan/context';
import { openWanPhase, packWanPhase, wanStageComponents, WAN_ENCODER_COMPONENTS, type WanPhaseRun } from '../families/wan/phases';
import { wanT2VPipelineSpec, type WanT2VPolicies } from '../families/wan/pipeline';
import type { WanT2VState } from '../families/wan/state';
import type { Task } from '../request/omni-request';
import type { MatmulDtype } from '../native/plan-builder';
import type { StageReceiver, StageSender } from './connectors/stage-connector';
import type { StageRole } from '../pipeline/stage-payload';
import type { StageProgress } from './stage-progress';
import { StageWorker, type PhaseRun } from './stage-worker';
import { DEFAULT_MAX_IN_FLIGHT } from './topology';
import { WanSessionStage, type SessionStageStats } from '../families/wan/session-stages';

export interface StageHostOptions {
  role: StageRole;
  native: NativeBinding;
  modelsDir: string;
  defaultModel: string;
  /** Matrix-product dtype of the DiT (linear layers and attention). Default float32. */
  matmulDtype?: MatmulDtype;
  policies: WanT2VPolicies;
  tasks: readonly Task[];
  input: StageReceiver;
  output: StageSender;
  /** Further consumers of the stage's outputs (fan-out; see `StageWorkerOptions.taps`). */
  taps?: readonly StageSender[];
  maxInFlight?: number;
  onHeld?(requestId: string): void;
  onPassed?(requestId: string): void;
  onProgress?(ev: StageProgress): void;
}

/** What a stage holds resident: its loaded components' weight bytes, per model and in sum. */
export interface StageMemory {
  role: StageRole;
  /** Components constructed on this stage (over the models it has loaded). */
  components: string[];
  /**
   * Component → weight bytes resident when the model was loaded, summed over its models. Components whose weights
   * load lazily on first use (the DiT) count 0 here; `components` says what is constructed at all.
   */
  weightBytes: Record<string, number>;
  /** Weight bytes of encoder components (tokenizer, text encoder, VAE encoder) constructed here. */
  encoderBytes: number;
  /** World-session state held here. */
  sessions: SessionStageStats;
}

/**
 * One stage of the Wan family (stage-specific construction): a model registry that constructs and loads only the
 * stage's components (`wanStageComponents`), its own StepScheduler, and a `StageWorker` over the given links.
 * The same host runs in-process (tests, `in-process` connector) and in a stage process (`stage-main`).
 */
export class StageHost {
  readonly worker: StageWorker<WanT2VContext, WanT2VState>;
  readonly models: ModelRegistry;
  private readonly loaded = new Set<Promise<WanT2VModel>>();
  private readonly sessions: WanSessionStage;

  constructor(private readonly o: StageHostOptions) {
    const components = wanStageComponents(o.role, o.policies.expert);
    this.models = new ModelRegistry(o.native, o.modelsDir, o.defaultModel, components, { matmulDtype: o.matmulDtype });
    const pipeline = buildPipeline(wanT2VPipelineSpec(o.policies), { tasks: o.tasks });
    const env = {
      native: o.native,
      pipeline,
      model: (id: string) => {
        const p = this.models.get(id);
        this.loaded.add(p);
        return p;
      },
    };
    const steps = new StepScheduler();
    const sessions = new WanSessionStage({ role: o.role, native: o.native, model: env.model, steps });
    this.sessions = sessions;
    this.worker = new StageWorker<WanT2VContext, WanT2VState>({
      role: o.role,
      phases: {
        open: (role, p) => openWanPhase(env, role, p),
        pack: (role, run: PhaseRun<WanT2VContext, WanT2VState>) => packWanPhase(role, run as WanPhaseRun),
        session: { claims: (p) => sessions.claims(p), handle: (p, emit, report) => sessions.handle(p, emit, report) },
      },
      input: o.input,
      output: o.output,
      taps: o.taps,
      steps,
      maxInFlight: o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT[o.role],
      onHeld: o.onHeld,
      onPassed: o.onPassed,
      onProgress: o.onProgress,
    });
  }

  /** Loads model `id` now (a stage process warms up before it reports ready). */
  async preload(id: string): Promise<void> {
    const p = this.models.get(id);
    this.loaded.add(p);
    await p;
  }

  /** The weight bytes this stage holds, per component. */
  async memory(): Promise<StageMemory> {
    const weightBytes: Record<string, number> = {};
    const components = new Set<string>();
    for (const p of this.loaded) {
      const m = await p.catch(() => undefined);
      if (m === undefined) continue;
      for (const c of m.loadedComponents) components.add(c);
      for (const [c, b] of Object.entries(m.weightBytes)) weightBytes[c] = (weightBytes[c] ?? 0) + b;
    }
    const encoderBytes = WAN_ENCODER_COMPONENTS.reduce((n, c) => n + (weightBytes[c] ?? 0), 0);
    return { role: this.o.role, components: [...components].sort(), weightBytes, encoderBytes, sessions: this.sessions.stats() };
  }

  async close(): Promise<void> {
    await this.worker.close();
    await this.sessions.close();
    await this.models.dispose();
  }
}
