/** A buffer's size (floats) and the op indices of its first definition and last use, inclusive. */
export interface Interval {
  id: number;
  size: number;
  start: number;
  end: number;
}

/**
 * Greedy-by-size arena layout (as in TFLite's "greedy by size" memory planner; Pisarchyk & Lee, "Efficient
 * Memory Management for Deep Neural Net Inference", 2020): largest buffers first, each at the lowest offset that
 * does not overlap a placed buffer whose lifetime intersects its own. Offsets are 16-float (64-byte) aligned.
 * Returns each buffer's offset and the arena size, in floats.
 */
export function planArena(intervals: readonly Interval[]): { offsets: Map<number, number>; total: number } {
  const align = (n: number) => Math.ceil(n / 16) * 16;
  const order = [...intervals].sort((a, b) => b.size - a.size || a.start - b.start);
  const placed: Array<Interval & { offset: number }> = [];
  const offsets = new Map<number, number>();
  let total = 0;
  for (const iv of order) {
    const live = placed.filter((p) => p.start <= iv.end && iv.start <= p.end).sort((a, b) => a.offset - b.offset);
    let offset = 0;
    for (const p of live) {
      if (offset + iv.size <= p.offset) break;
      offset = Math.max(offset, align(p.offset + p.size));
    }
    placed.push({ ...iv, offset });
    offsets.set(iv.id, offset);
    total = Math.max(total, offset + iv.size);
  }
  return { offsets, total: align(total) };
}
