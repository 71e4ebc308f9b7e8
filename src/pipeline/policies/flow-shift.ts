import type { Policy } from './policy';

/**
 * The flow shift a request samples with. A request's explicit `flowShift` always wins; otherwise `fixed` uses
 * the model's default and `byResolution` looks the shift up by pixel count (larger images need more shift to
 * spend steps at high noise; SD3 §5.3.2, Cosmos' resolution buckets): the first row with maxPixels ≥ w·h.
 */
export class FlowShiftPolicy implements Policy {
  readonly slot = 'flow_shift' as const;
  readonly name: string;

  private constructor(readonly table: ReadonlyArray<{ maxPixels: number; shift: number }>) {
    this.name = table.length === 0 ? 'fixed-shift' : 'resolution-shift';
  }

  static fixed(): FlowShiftPolicy {
    return new FlowShiftPolicy([]);
  }

  static byResolution(table: ReadonlyArray<{ maxPixels: number; shift: number }>): FlowShiftPolicy {
    if (table.length === 0) throw new RangeError('byResolution needs at least one row');
    for (let i = 1; i < table.length; i++)
      if (!(table[i].maxPixels > table[i - 1].maxPixels)) throw new RangeError('byResolution rows must have increasing maxPixels');
    for (const r of table) {
      if (!(r.shift > 0) || !Number.isFinite(r.shift)) throw new RangeError(`flow shift must be a positive number, got ${r.shift}`);
      if (!(r.maxPixels > 0) || !Number.isFinite(r.maxPixels)) throw new RangeError(`maxPixels must be a positive number, got ${r.maxPixels}`);
    }
    return new FlowShiftPolicy([...table]);
  }

  /** The shift for a request of `width`×`height` pixels. */
  resolve(explicit: number | undefined, modelDefault: number, width: number, height: number): number {
    if (explicit !== undefined) return explicit;
    if (this.table.length === 0) return modelDefault;
    const px = width * height;
    return (this.table.find((r) => px <= r.maxPixels) ?? this.table[this.table.length - 1]).shift;
  }
}
