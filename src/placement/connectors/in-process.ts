import { parseStagePayload, type DiffusionStagePayload } from '../../pipeline/stage-payload';
import { CreditWindow } from './credit-window';
import { ReceiveQueue } from './receive-queue';
import { connectorClosed, type ConnectorState, type StageReceiver, type StageSender } from './stage-connector';

export interface InProcessConnectorOptions {
  /** Payloads the receiver takes ahead of its consumer (the credit window). Default 2. */
  credits?: number;
  /** Name in error messages. Default "in-process connector". */
  name?: string;
}

/**
 * A stage link inside one process: a bounded hand-off of the payload object itself (no copy, no framing). The
 * payload is validated on `put` like every connector does, so a family bug shows up in tests, not only over TCP.
 */
export function createInProcessConnector(options: InProcessConnectorOptions = {}): { sender: StageSender; receiver: StageReceiver } {
  const credits = options.credits ?? 2;
  if (!Number.isSafeInteger(credits) || credits < 1) throw new RangeError(`createInProcessConnector: credits must be a positive integer, got ${credits}`);
  const name = options.name ?? 'in-process connector';
  const window = new CreditWindow();
  const queue = new ReceiveQueue(`${name} receiver`);
  window.grant(credits);
  let state: ConnectorState = 'ready';
  const closeAll = async () => {
    state = 'closed';
    window.close(connectorClosed(name, ' (the payload was not accepted)'));
    queue.close();
  };
  const sender: StageSender = {
    get state() {
      return state;
    },
    get ready() {
      return state === 'closed' ? Promise.reject(connectorClosed(name)) : Promise.resolve();
    },
    get credits() {
      return window.credits;
    },
    async put(payload: DiffusionStagePayload) {
      if (state === 'closed') throw connectorClosed(name);
      const p = parseStagePayload(payload);
      await window.acquire();
      queue.accept(p, () => window.grant(1));
    },
    close: closeAll,
  };
  const receiver: StageReceiver = {
    get state() {
      return state;
    },
    get ready() {
      return sender.ready;
    },
    get queued() {
      return queue.length;
    },
    get: () => queue.get(),
    payloads$: queue.payloads$,
    close: closeAll,
  };
  return { sender, receiver };
}
