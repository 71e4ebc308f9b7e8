/**
 * Native memory baselines that do not move under a test's feet.
 *
 * `native.stats().bytesInUse` is process-wide, and jest runs test files one after another in one process (always
 * on a 2-core machine). What an earlier file left behind is freed at a time no test controls: native calls it left
 * in flight free their buffers when they return, and tensors it left to the garbage collector are freed whenever V8
 * next collects, their finalizers running on a later event-loop turn. A baseline read before an `await` can then
 * drop by megabytes before the test compares against it. `settledBytesInUse` waits for all of that to happen first,
 * so a later equality check measures only the test's own allocations.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import type { NativeBinding } from '../../src/native/binding';

/** V8's `gc()`, reached without the `--expose-gc` command-line flag (a fresh context sees the flag set at run time). */
function exposedGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const nextTurn = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Native bytes in use (tensors, packed weights, plan arenas; not per-thread scratch) once the executor has no job
 * queued or running and every unreachable native object has been collected and finalized. Polls the executor
 * (every 5 ms, up to 10 s), then runs full collections, each followed by an event-loop turn for the finalizers,
 * until two reads agree (at most 5 rounds). Costs one or more full GCs (tens of ms each): call it for baselines,
 * not in loops.
 * @throws Error when the executor is still busy after 10 s (a test left native work running).
 */
export async function settledBytesInUse(native: NativeBinding): Promise<number> {
  for (let waited = 0; native.stats().queued + native.stats().running > 0; waited += 5) {
    if (waited >= 10_000) throw new Error(`native executor still busy after 10 s: ${JSON.stringify(native.stats())}`);
    await nextTurn(5);
  }
  const gc = exposedGc();
  let last = native.stats().bytesInUse;
  for (let round = 0; round < 5; round++) {
    gc();
    await nextTurn();
    const now = native.stats().bytesInUse;
    if (now === last) return now;
    last = now;
  }
  return last;
}
