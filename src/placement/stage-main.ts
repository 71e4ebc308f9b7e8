import { loadNative } from '../native/binding';
import { loadFamilyModule } from '../pipeline/family/module';
import { FamilyRegistry } from '../pipeline/family/registry';
import { defaultPolicies } from '../pipeline/policies/policies';
import { connectShm, connectTcp, listenShm, listenTcp } from './connectors';
import type { SocketStageReceiver } from './connectors/socket-receiver';
import type { SocketStageSender } from './connectors/socket-sender';
import { StageHost } from './stage-host';
import { StageProcessConfigSchema, type LinkAddress, type ParentToStage, type StageToParent } from './stage-ipc';

/**
 * Entry point of a stage process (forked by `StageProcesses`; compiled to `dist/src/placement/stage-main.js`).
 * argv[2] is a `StageProcessConfig` as JSON. The process loads the deployment's families from their modules, listens
 * on its input link, connects to the next stage, loads its components (only its own), then reports `ready` over IPC;
 * it reports each request it takes (`held`) and hands on (`passed`) and its progress on them (`progress`), answers
 * `ping` (liveness), `holding?` and `memory?`, and exits on `shutdown` or when the parent is gone.
 */
async function main(): Promise<void> {
  const send = (m: StageToParent) => process.send?.(m);
  const config = StageProcessConfigSchema.parse(JSON.parse(process.argv[2] ?? 'null'));
  const native = loadNative();
  const families = new FamilyRegistry(config.families.map(loadFamilyModule));
  const listen = (a: LinkAddress): SocketStageReceiver =>
    'socketPath' in a
      ? listenShm({ socketPath: a.socketPath, dir: config.shmDir, credits: config.credits })
      : listenTcp({ port: a.port, credits: config.credits });
  const connect = (a: LinkAddress): SocketStageSender =>
    'socketPath' in a ? connectShm({ socketPath: a.socketPath, dir: config.shmDir }) : connectTcp({ port: a.port });
  const input = listen(config.listen);
  await input.ready;
  const output = connect(config.downstream);
  const host = new StageHost({
    role: config.role,
    native,
    families,
    modelsDir: config.modelsDir,
    defaultModel: config.defaultModel,
    load: config.matmulDtype === undefined ? {} : { matmulDtype: config.matmulDtype },
    policies: defaultPolicies(),
    tasks: config.tasks,
    world: config.world,
    budgets: config.caches,
    input,
    output,
    maxInFlight: config.maxInFlight,
    onHeld: (requestId) => send({ type: 'held', requestId }),
    onPassed: (requestId) => send({ type: 'passed', requestId }),
    onProgress: (event) => send({ type: 'progress', event }),
  });
  await host.preload(config.defaultModel);
  const stop = async () => {
    await host.close().catch(() => undefined);
    process.exit(0);
  };
  process.on('disconnect', () => void stop());
  process.on('message', (m: ParentToStage) => {
    if (m.type === 'ping') send({ type: 'pong', seq: m.seq });
    if (m.type === 'holding?') send({ type: 'holding', seq: m.seq, requestIds: host.worker.holding() });
    if (m.type === 'memory?')
      void host
        .memory()
        .then((stage) => send({ type: 'memory', seq: m.seq, rssBytes: process.memoryUsage().rss, nativeBytesInUse: native.stats().bytesInUse, stage }));
    if (m.type === 'cancel') host.worker.cancel(m.requestId);
    if (m.type === 'shutdown') void stop();
  });
  void host.worker.start();
  const addr = input.address();
  send({ type: 'ready', ...('port' in addr ? { port: addr.port } : {}) });
}

main().catch((e: unknown) => {
  process.send?.({ type: 'fatal', message: (e as Error)?.message ?? String(e) } satisfies StageToParent);
  process.exit(1);
});
