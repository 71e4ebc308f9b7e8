import type { OmniEvent, OmniOutput } from '../../src/request/omni-event';

/** The output of the `final` event; fails the test with the error events when there is none. */
export function finalOf(events: readonly OmniEvent[]): OmniOutput {
  const f = events.find((e) => e.type === 'final');
  if (f === undefined || f.type !== 'final') throw new Error(`no final event: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
  return f.output;
}
