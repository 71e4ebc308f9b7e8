import { fork, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import * as path from 'node:path';
import { OmniError } from '../errors';
import { ownedTempDir } from '../util/owned-temp-dir';
import type { StageRole } from '../pipeline/stage-payload';
import { connectShm, connectTcp, defaultShmDir, listenShm, listenTcp } from './connectors';
import type { SocketStageReceiver } from './connectors/socket-receiver';
import type { SocketStageSender } from './connectors/socket-sender';
import type { StageExecutorOptions, StageHosting, StageSink } from './stage-hosting';
import type { StageMemory } from './stage-host';
import type { LinkAddress, ParentToStage, StageProcessConfig, StageToParent } from './stage-ipc';
import type { ExecutorHealth } from '../executor/executor';
import { silentLogger, type Logger } from '../util/logger';

/** What a stage process reports about its memory: its stage's (`StageMemory`) and the process's own. */
export interface StageProcessMemory extends StageMemory {
  pid: number;
  /** Resident set size of the process, bytes (`process.memoryUsage().rss`). */
  rssBytes: number;
  /** Bytes of native tensors alive in the process (the addon's `stats().bytesInUse`). */
  nativeBytesInUse: number;
}

export interface StageProcessesOptions extends StageExecutorOptions {
  /** ms a stage process has to start and load its components. Default 60 000. */
  startTimeoutMs?: number;
}

interface Child {
  role: StageRole;
  proc: ChildProcess;
  listen: LinkAddress;
  replies: Map<number, (m: StageToParent) => void>;
  /** The liveness ping not yet answered: its seq and when it was sent (performance.now(), ms). */
  ping?: { seq: number; sentAt: number };
}

const ORDER: readonly StageRole[] = ['encode', 'denoise', 'decode'];
const UPSTREAM: Readonly<Record<StageRole, StageRole | undefined>> = { encode: undefined, denoise: 'encode', decode: 'denoise' };
const NEXT: Readonly<Record<StageRole, StageRole | undefined>> = { encode: 'denoise', denoise: 'decode', decode: undefined };

/**
 * A disaggregated topology whose stages are OS processes (`child_process.fork` of `stage-main`), linked by shm
 * (tmpfs frame files + Unix sockets, one host) or TCP connectors with credit flow control; the executor (requests in,
 * results out) runs in this process. Each stage process loads only its components, and the deployment's families from
 * their `module`.
 *
 * **Failure handling.** The parent tracks where each request is from the stages' `held`/`passed` reports. When a
 * stage process exits unexpectedly, the parent first asks the upstream stage which requests it still holds (an IPC
 * barrier: every hand-over it reported before the answer has been seen), then fails the requests the dead stage
 * held with OMNIRX_ERR_STAGE_FAILED, then forks a replacement on the same address. Requests upstream keep going:
 * their puts wait for the link to come back (and are retried if the link dropped before acceptance), so nothing
 * durable is lost. A result the dead Decode had already sent but the front had not yet taken fails too.
 *
 * **Supervision** (`topology.supervision`). Each stage process is pinged over IPC every `livenessIntervalMs`; one that
 * has not answered for `livenessTimeoutMs` (stopped with SIGSTOP, a wedged event loop) is killed with SIGKILL and so
 * restarted as above. More than `maxRestarts` restarts within `windowMs`, or a replacement that fails to start, takes
 * the pipeline down: `health()` is `down`, every request and session fails with OMNIRX_ERR_STAGE_FAILED through the
 * sink's `down`, and no further restart is tried (the deployment must be restarted: a crash loop would otherwise
 * fail requests forever). Restarts, frozen stages and going down are logged (`logger`).
 */
export class StageProcesses implements StageHosting {
  readonly reportsDelivery = true;
  private readonly children = new Map<StageRole, Child>();
  private readonly up = new Map<StageRole, Promise<void>>();
  /** Roles being restarted now. */
  private readonly restarting = new Set<StageRole>();
  /** When each restart within the supervision window happened (performance.now(), ms). */
  private restartTimes: number[] = [];
  private restartCount = 0;
  /** Why the pipeline cannot recover, once it cannot. */
  private downReason?: string;
  private readonly liveness: NodeJS.Timeout;
  private lastTick = performance.now();
  private seq = 0;
  private closing = false;

  private constructor(
    private readonly o: StageProcessesOptions,
    private readonly sink: StageSink,
    private readonly runDir: string,
    readonly results: SocketStageReceiver,
    private readonly config: (role: StageRole) => Omit<StageProcessConfig, 'listen' | 'downstream'>,
    readonly toEncode: SocketStageSender,
  ) {
    this.liveness = setInterval(() => this.checkLiveness(), o.topology.supervision.livenessIntervalMs);
    this.liveness.unref();
  }

  private get log(): Logger {
    return this.o.logger ?? silentLogger;
  }

  /**
   * Forks the three stage processes (Decode first, so each connects to a listening next stage) and waits until
   * each has loaded its components.
   * @throws OmniError OMNIRX_ERR_STAGE_FAILED when a stage process fails to start.
   */
  static async start(o: StageProcessesOptions, sink: StageSink): Promise<StageProcesses> {
    const connector = o.topology.connector;
    if (connector === 'in-process')
      throw new OmniError('OMNIRX_ERR_CONFIG', 'StageProcesses needs the shm or tcp connector (in-process stages: createInProcessStages)', {
        param: 'topology.connector',
      });
    const families = o.catalog.families.list().map((f) => {
      if (f.module === undefined)
        throw new OmniError(
          'OMNIRX_ERR_CONFIG',
          `model family '${f.name}' has no \`module\` a stage process could load it from; run it in process or give its definition a module`,
          { param: 'families' },
        );
      return f.module;
    });
    const shmDir = defaultShmDir();
    const runDir = ownedTempDir(shmDir, 'omnirx-stages-');
    const results = connector === 'shm' ? listenShm({ socketPath: path.join(runDir, 'front.sock'), dir: runDir }) : listenTcp({ port: 0 });
    await results.ready;
    const addr = results.address();
    const frontAddr: LinkAddress = 'port' in addr ? { port: addr.port } : { socketPath: addr.path };
    const s = o.topology.stages;
    const config = (role: StageRole): Omit<StageProcessConfig, 'listen' | 'downstream'> => ({
      role,
      families,
      modelsDir: o.catalog.modelsDir,
      defaultModel: o.catalog.defaultModel,
      ...(o.load.matmulDtype === undefined || role !== 'denoise' ? {} : { matmulDtype: o.load.matmulDtype }),
      tasks: [...o.tasks],
      world: o.world,
      caches: o.budgets,
      connector,
      shmDir: runDir,
      credits: s[role].credits,
      ...(s[role].maxInFlight === undefined ? {} : { maxInFlight: s[role].maxInFlight }),
      ...(s[role].threads === undefined ? {} : { threads: s[role].threads }),
    });
    const listenOf = (role: StageRole): LinkAddress => (connector === 'shm' ? { socketPath: path.join(runDir, `${role}.sock`) } : { port: 0 });
    // The front's sender to Encode is created once Encode's address is known.
    let encodeAddr: LinkAddress | undefined;
    const spawned: Array<{ role: StageRole; proc: ChildProcess; listen: LinkAddress }> = [];
    let downstream = frontAddr;
    try {
      for (const role of [...ORDER].reverse()) {
        const r = await StageProcesses.fork(o, { ...config(role), listen: listenOf(role), downstream });
        spawned.push({ role, proc: r.proc, listen: r.listen });
        downstream = r.listen;
        if (role === 'encode') encodeAddr = r.listen;
      }
    } catch (e) {
      for (const c of spawned) c.proc.kill('SIGKILL');
      await results.close();
      rmSync(runDir, { recursive: true, force: true });
      throw e;
    }
    const toEncode = 'socketPath' in encodeAddr! ? connectShm({ socketPath: encodeAddr.socketPath, dir: runDir }) : connectTcp({ port: encodeAddr!.port });
    const sp = new StageProcesses(o, sink, runDir, results, config, toEncode);
    for (const c of spawned) sp.adopt(c.role, c.proc, c.listen);
    return sp;
  }

  /** Forks one stage process and waits for its `ready`; resolves with its process and bound input address. */
  private static fork(o: StageProcessesOptions, config: StageProcessConfig): Promise<{ proc: ChildProcess; listen: LinkAddress }> {
    const entry = o.entry ?? path.join(__dirname, 'stage-main.js');
    const env = config.threads === undefined ? process.env : { ...process.env, OMNIRX_THREADS: String(config.threads) };
    const proc = fork(entry, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [], env });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(`did not report ready within ${o.startTimeoutMs ?? 60_000} ms`), o.startTimeoutMs ?? 60_000);
      const fail = (why: string) => {
        clearTimeout(timer);
        proc.off('message', onMessage);
        proc.off('exit', onExit);
        proc.off('error', onError);
        proc.kill('SIGKILL');
        reject(new OmniError('OMNIRX_ERR_STAGE_FAILED', `the ${config.role} stage process ${why}`));
      };
      const onMessage = (m: StageToParent) => {
        if (m.type === 'fatal') fail(`failed to start: ${m.message}`);
        if (m.type !== 'ready') return;
        clearTimeout(timer);
        proc.off('message', onMessage);
        proc.off('exit', onExit);
        proc.off('error', onError);
        resolve({ proc, listen: m.port !== undefined ? { port: m.port } : config.listen });
      };
      const onExit = (code: number | null, signal: string | null) => fail(`exited while starting (${signal ?? `code ${code}`})`);
      const onError = (e: Error) => fail(`could not be started: ${e.message}`);
      proc.on('message', onMessage);
      proc.on('exit', onExit);
      proc.on('error', onError);
    });
  }

  private adopt(role: StageRole, proc: ChildProcess, listen: LinkAddress): void {
    const child: Child = { role, proc, listen, replies: new Map() };
    this.children.set(role, child);
    this.up.set(role, Promise.resolve());
    proc.on('message', (m: StageToParent) => {
      if (m.type === 'held') this.sink.moved(m.requestId, role);
      else if (m.type === 'progress') this.sink.progress(m.event);
      else if (m.type === 'passed') {
        const next = NEXT[role];
        if (next !== undefined) this.sink.moved(m.requestId, next);
        else this.sink.delivered(m.requestId);
      } else if (m.type === 'pong') {
        if (child.ping?.seq === m.seq) child.ping = undefined;
      } else if (m.type === 'holding' || m.type === 'memory') {
        child.replies.get(m.seq)?.(m);
        child.replies.delete(m.seq);
      }
    });
    // A message sent just as the process dies fails with EPIPE; its exit is handled below.
    proc.on('error', (e) => this.log.warn({ stage: role, pid: proc.pid, err: e.message }, 'stage process IPC error'));
    proc.on('exit', (code, signal) => {
      for (const r of child.replies.values()) r({ type: 'fatal', message: 'exited' });
      child.replies.clear();
      if (!this.closing) this.up.set(role, this.recover(child, code, signal));
    });
  }

  /** Asks stage `role` and waits for the answer (a `fatal` stand-in when it is gone or does not answer in time). */
  private ask(role: StageRole, m: ParentToStage & { seq: number }, timeoutMs = 5000): Promise<StageToParent> {
    const child = this.children.get(role);
    if (child === undefined || child.proc.exitCode !== null || child.proc.signalCode !== null || !child.proc.connected)
      return Promise.resolve({ type: 'fatal', message: 'not running' });
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        child.replies.delete(m.seq);
        resolve({ type: 'fatal', message: 'no answer' });
      }, timeoutMs);
      child.replies.set(m.seq, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      child.proc.send(m);
    });
  }

  private async recover(dead: Child, code: number | null, signal: string | null): Promise<void> {
    const role = dead.role;
    const upstream = UPSTREAM[role];
    const exit = signal ?? `code ${code}`;
    this.restarting.add(role);
    try {
      // One turn of the event loop first: acks the dead stage sent this process before it died (the front's puts to
      // Encode) are read and applied. Then an IPC barrier: every `passed` the upstream stage sent before its answer has
      // been applied by now.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (upstream !== undefined) await this.ask(upstream, { type: 'holding?', seq: ++this.seq });
      const why = `the ${role} stage process exited (${exit}) while it held the request`;
      for (const [id, loc] of this.sink.locations())
        if (loc === role) this.sink.fail(id, new OmniError('OMNIRX_ERR_STAGE_FAILED', `${why}; it is being restarted`));
      // Session state (KV on Denoise, decoder state on Decode) died with the process: those sessions end.
      if (role !== 'encode')
        this.sink.failSessions(new OmniError('OMNIRX_ERR_STAGE_FAILED', `the ${role} stage process exited (${exit}); the session's state on it is lost`));
      if (this.closing || this.downReason !== undefined) return;
      const { maxRestarts, windowMs } = this.o.topology.supervision;
      const now = performance.now();
      this.restartTimes = [...this.restartTimes.filter((t) => now - t < windowMs), now];
      if (this.restartTimes.length > maxRestarts) {
        this.goDown(`the ${role} stage process exited (${exit}): more than ${maxRestarts} stage restarts within ${windowMs} ms (a crash loop)`, dead.proc.pid);
        return;
      }
      this.restartCount++;
      this.log.warn({ stage: role, pid: dead.proc.pid, exit, restarts: this.restartCount }, 'stage process exited; restarting it');
      let r: { proc: ChildProcess; listen: LinkAddress };
      try {
        r = await StageProcesses.fork(this.o, { ...this.config(role), listen: dead.listen, downstream: this.downstreamOf(role) });
      } catch (e) {
        this.goDown(`the ${role} stage process could not be restarted: ${(e as Error).message}`, dead.proc.pid);
        return;
      }
      if (this.closing) {
        r.proc.kill('SIGKILL');
        return;
      }
      this.adopt(role, r.proc, r.listen);
      this.log.info({ stage: role, pid: r.proc.pid }, 'stage process restarted');
    } finally {
      this.restarting.delete(role);
    }
  }

  /** The pipeline cannot recover: logs why, fails everything through the sink and stops the stage processes. */
  private goDown(reason: string, pid: number | undefined): void {
    if (this.downReason !== undefined) return;
    this.downReason = reason;
    this.log.error({ pid, reason }, 'pipeline down: stage processes are not restarted again; restart the deployment');
    this.sink.down(new OmniError('OMNIRX_ERR_STAGE_FAILED', `the pipeline is down: ${reason}`));
    // Puts waiting for the Encode link to come back end now (it will not).
    void this.toEncode.close();
    for (const c of this.children.values()) c.proc.kill('SIGKILL');
  }

  /** Pings each running stage process; kills one whose ping went unanswered for `livenessTimeoutMs`. */
  private checkLiveness(): void {
    const { livenessIntervalMs, livenessTimeoutMs } = this.o.topology.supervision;
    const now = performance.now();
    // This process's own event loop stalled (its pongs may sit unread): start the pings over rather than blame a stage.
    const stalled = now - this.lastTick > livenessIntervalMs + livenessTimeoutMs / 2;
    this.lastTick = now;
    if (this.closing || this.downReason !== undefined) return;
    for (const c of this.children.values()) {
      if (this.restarting.has(c.role) || c.proc.exitCode !== null || c.proc.signalCode !== null || !c.proc.connected) continue;
      if (c.ping !== undefined && !stalled) {
        if (now - c.ping.sentAt < livenessTimeoutMs) continue;
        this.log.error({ stage: c.role, pid: c.proc.pid, silentMs: Math.round(now - c.ping.sentAt) }, 'stage process is not responding; killing it');
        c.proc.kill('SIGKILL');
        continue;
      }
      c.ping = { seq: ++this.seq, sentAt: now };
      c.proc.send({ type: 'ping', seq: c.ping.seq } satisfies ParentToStage);
    }
  }

  /** `down` once the pipeline cannot recover; `degraded` while a stage process is being restarted; else `ok`. */
  health(): ExecutorHealth {
    if (this.downReason !== undefined) return { status: 'down', reason: this.downReason };
    if (this.closing) return { status: 'down', reason: 'the stage processes are closed' };
    if (this.restarting.size > 0) return { status: 'degraded', reason: `restarting the ${[...this.restarting].join(', ')} stage process` };
    return { status: 'ok' };
  }

  private downstreamOf(role: StageRole): LinkAddress {
    const next = NEXT[role];
    if (next !== undefined) return this.children.get(next)!.listen;
    const a = this.results.address();
    return 'port' in a ? { port: a.port } : { socketPath: a.path };
  }

  /** The stage process of `role` now running (its `message` events carry `StageToParent` reports). */
  process(role: StageRole): ChildProcess {
    return this.children.get(role)!.proc;
  }

  /** Stage processes restarted so far. */
  get restarts(): number {
    return this.restartCount;
  }

  /** Resolves once every stage is up (a dead one restarted), or the pipeline is down (`health()`). */
  async whenUp(): Promise<void> {
    for (;;) {
      const pending = [...this.up.values()];
      await Promise.all(pending);
      if ([...this.up.values()].every((p, i) => p === pending[i])) return;
    }
  }

  /** Asks every stage process to stop request `requestId`'s work. */
  cancel(requestId: string): void {
    for (const c of this.children.values()) if (c.proc.connected) c.proc.send({ type: 'cancel', requestId } satisfies ParentToStage);
  }

  /** Each stage process's resident and weight bytes. */
  async memory(): Promise<Record<StageRole, StageProcessMemory>> {
    const out = {} as Record<StageRole, StageProcessMemory>;
    for (const role of ORDER) {
      const m = await this.ask(role, { type: 'memory?', seq: ++this.seq });
      if (m.type !== 'memory')
        throw new OmniError('OMNIRX_ERR_STAGE_FAILED', `the ${role} stage process did not report its memory (${m.type === 'fatal' ? m.message : m.type})`);
      out[role] = { ...m.stage, pid: this.children.get(role)!.proc.pid ?? -1, rssBytes: m.rssBytes, nativeBytesInUse: m.nativeBytesInUse };
    }
    return out;
  }

  /** Closes the links to the stages, stops the stage processes and removes the run folder. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearInterval(this.liveness);
    await this.toEncode.close();
    await this.results.close();
    await Promise.all(
      [...this.children.values()].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.proc.exitCode !== null || c.proc.signalCode !== null) return resolve();
            const t = setTimeout(() => c.proc.kill('SIGKILL'), 5000);
            c.proc.once('exit', () => {
              clearTimeout(t);
              resolve();
            });
            if (c.proc.connected) c.proc.send({ type: 'shutdown' } satisfies ParentToStage);
            else c.proc.kill('SIGTERM');
          }),
      ),
    );
    rmSync(this.runDir, { recursive: true, force: true });
  }
}
