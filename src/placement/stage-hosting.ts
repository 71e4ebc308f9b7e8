import type { CacheBudgets } from '../cache/budgets';
import type { OmniError } from '../errors';
import type { ExecutorHealth } from '../executor/executor';
import type { NativeBinding } from '../native/binding';
import type { ModelCatalog } from '../pipeline/family/catalog';
import type { ModelLoadOptions } from '../pipeline/family/model';
import type { StageProgress } from '../pipeline/family/session';
import type { PipelinePolicies } from '../pipeline/policies/policies';
import type { StageRole } from '../pipeline/stage-payload';
import type { Task } from '../request/omni-request';
import type { Logger } from '../util/logger';
import type { StageReceiver, StageSender } from './connectors/stage-connector';
import type { StageMemory } from './stage-host';
import type { DisaggregatedTopology } from './topology';

/** Where a request of a disaggregated pipeline is: still at the front, or held by a stage. */
export type RequestLocation = 'front' | StageRole;

/** What the stage executor is started with. */
export interface StageExecutorOptions {
  native: NativeBinding;
  /** The models and families (a stage process loads each family from its `module`). */
  catalog: ModelCatalog;
  tasks: readonly Task[];
  /** Whether the deployment serves world sessions (the Denoise stage then keeps a chunk-KV pool). */
  world: boolean;
  policies: PipelinePolicies;
  /** Whether `policies` were chosen by the caller (stage processes build the defaults from the config alone). */
  customPolicies: boolean;
  /** The deployment's cache budgets, which every stage applies (Encode's feature cache, Denoise's chunk-KV pool). */
  budgets: CacheBudgets;
  /** How the Denoise stage loads its models (matmul dtype). */
  load: ModelLoadOptions;
  topology: DisaggregatedTopology;
  /** The compiled stage entry point of stage processes. */
  entry?: string;
  /** Where stage restarts, frozen stages and a pipeline going down are logged. Default: nowhere. */
  logger?: Logger;
}

/** What the stages report to the executor that runs requests on them. */
export interface StageSink {
  /** A stage's progress on a request or a session. */
  progress(ev: StageProgress): void;
  /** Stage `role` now holds request `requestId` (a request only moves downstream). */
  moved(requestId: string, role: StageRole): void;
  /** Decode handed request `requestId`'s result on: every progress event of it has been reported. */
  delivered(requestId: string): void;
  /** Requests sent and not yet finished, with where each is. */
  locations(): Map<string, RequestLocation>;
  /** Fails request `requestId` with `err` if it is still pending. */
  fail(requestId: string, err: OmniError): void;
  /** Ends every open session with `err` (a stage holding session state died); their state is gone. */
  failSessions(err: OmniError): void;
  /** The stages cannot recover (`health()` is `down` from now on): every request and session fails with `err`. */
  down(err: OmniError): void;
}

/** The running stages, in this process or as stage processes. */
export interface StageHosting {
  /** Link to the Encode stage. */
  readonly toEncode: StageSender;
  /** Link from the Decode stage (outputs and failures of every request and session). */
  readonly results: StageReceiver;
  /**
   * Decode's hand-overs are reported through `delivered` (stage processes, whose progress travels over IPC apart from
   * the results link): a result is held until its report, so `output` comes after every progress event.
   */
  readonly reportsDelivery: boolean;
  /** Whether the stages can take work (`degraded` while one restarts, `down` for good once one cannot). */
  health(): ExecutorHealth;
  /** Stops request `requestId`'s work on whichever stage holds it. */
  cancel(requestId: string): void;
  /** What each stage holds resident. */
  memory(): Promise<Record<StageRole, StageMemory>>;
  close(): Promise<void>;
}
