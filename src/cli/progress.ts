import { MultiBar, type SingleBar } from 'cli-progress';
import type { Artifact } from '../request/artifacts';
import type { OmniEvent } from '../request/omni-event';

/** Renders a request's events for a terminal or a log. */
export interface ProgressReporter {
  /** Shows one event (errors are left to the caller, which prints them on stderr). */
  onEvent(event: OmniEvent): void;
  /** Prints a free-form line without breaking an active progress bar. */
  line(text: string): void;
  /** Stops any active bar and restores the cursor; idempotent. */
  stop(): void;
}

/** Options of {@link createProgressReporter}. */
export interface ProgressOptions {
  stream: NodeJS.WritableStream;
  /** true: a cli-progress bar per denoise loop and other events as lines above it; false: plain lines only. */
  isTTY: boolean;
}

function describeArtifact(a: Artifact): string {
  switch (a.kind) {
    case 'video':
      return `video ${a.numFrames} frames ${a.width}x${a.height} @ ${a.fps} fps`;
    case 'image':
      return `image ${a.width}x${a.height}`;
    case 'latents':
      return `latents [${a.shape.join(', ')}]`;
  }
}

/**
 * The plain one-line form of an event, or `undefined` for events the reporter does not print (`error`, which the
 * caller reports on stderr). Steps read `step 3/20 sigma=0.8421 41.2 ms` (1-based index, sigma the noise level
 * the step started from, wall time in milliseconds).
 */
export function formatEventLine(event: OmniEvent): string | undefined {
  switch (event.type) {
    case 'queued':
      return `queued ${event.requestId} (position ${event.position})`;
    case 'admitted': {
      const params = Object.entries(event.params)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' ');
      return `admitted model=${event.model} steps=${event.estimate.steps} forwards=${event.estimate.forwards}${params ? ` ${params}` : ''}`;
    }
    case 'node_start':
      return `node ${event.node} started`;
    case 'node_end':
      return `node ${event.node} done ${event.ms.toFixed(1)} ms`;
    case 'step':
      return `step ${event.index + 1}/${event.total} sigma=${event.sigma.toFixed(4)} ${event.ms.toFixed(1)} ms`;
    case 'chunk':
      return `chunk ${event.node} ${describeArtifact(event.artifact)}`;
    case 'artifact':
      return `artifact ${event.name} ${describeArtifact(event.artifact)}`;
    case 'final':
      return `final seed=${event.output.seed} ${event.output.ms.toFixed(1)} ms`;
    case 'cancelled':
      return `cancelled after ${event.completedSteps} steps`;
    case 'error':
      return undefined;
  }
}

/**
 * Creates a reporter. Not a TTY: every event is one line (see {@link formatEventLine}). TTY: denoise steps
 * drive a cli-progress bar per loop node (`step i/total`, sigma, ms/step, ETA), other events print as lines
 * above the bars; a loop's bar is finished when its node ends.
 */
export function createProgressReporter(options: ProgressOptions): ProgressReporter {
  return options.isTTY ? new BarReporter(options.stream) : new LineReporter(options.stream);
}

class LineReporter implements ProgressReporter {
  constructor(private readonly stream: NodeJS.WritableStream) {}
  onEvent(event: OmniEvent): void {
    const text = formatEventLine(event);
    if (text !== undefined) this.line(text);
  }
  line(text: string): void {
    this.stream.write(`${text}\n`);
  }
  stop(): void {}
}

class BarReporter implements ProgressReporter {
  private multi: MultiBar | null = null;
  /** Bars of loop nodes that have not ended yet, by node name. */
  private readonly bars = new Map<string, { bar: SingleBar; total: number }>();

  constructor(private readonly stream: NodeJS.WritableStream) {}

  onEvent(event: OmniEvent): void {
    if (event.type === 'step') {
      this.step(event.node, event.index, event.total, event.sigma, event.ms);
      return;
    }
    const text = formatEventLine(event);
    if (event.type === 'node_end' && this.bars.has(event.node)) {
      this.bars.delete(event.node);
      // Last loop finished: leave its final bar on screen, then the line below it.
      if (this.bars.size === 0) this.stop();
      if (text !== undefined) this.line(text);
      return;
    }
    if (event.type === 'final' || event.type === 'cancelled') this.stop();
    if (text !== undefined) this.line(text);
  }

  private step(node: string, index: number, total: number, sigma: number, ms: number): void {
    const payload = { node, sigma: sigma.toFixed(4), ms: ms.toFixed(1) };
    let entry = this.bars.get(node);
    if (!entry) {
      this.multi ??= new MultiBar({
        stream: this.stream,
        format: '{node} |{bar}| {value}/{total} sigma={sigma} {ms} ms/step ETA {eta_formatted}',
        barsize: 30,
        hideCursor: true,
        // Redraw bars on every tick: after `log()` clears the line, an unchanged bar would otherwise stay blank.
        forceRedraw: true,
        gracefulExit: false,
        clearOnComplete: false,
        etaBuffer: 5,
      });
      entry = { bar: this.multi.create(total, 0, payload), total };
      this.bars.set(node, entry);
    }
    if (entry.total !== total) {
      entry.bar.setTotal(total);
      entry.total = total;
    }
    entry.bar.update(index + 1, payload);
  }

  line(text: string): void {
    if (this.multi) this.multi.log(`${text}\n`);
    else this.stream.write(`${text}\n`);
  }

  stop(): void {
    if (!this.multi) return;
    const multi = this.multi;
    this.multi = null;
    this.bars.clear();
    multi.update(); // flush lines logged since the last redraw
    multi.stop();
  }
}
