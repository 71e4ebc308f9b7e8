/**
 * A world session driven by a scripted action stream (docs/sessions.md), on the embedded default model: the agent
 * walks right, then up, then left. The consumer grants credits one chunk ahead (one credit per frame), so the next
 * chunk is already denoising when a chunk arrives; on each change of direction it sets the new action and flushes, so
 * the chunk in flight is redone with it instead of showing one more step of the old direction.
 *
 *   npm run build && node dist/examples/world-session.js
 */
import { filter, lastValueFrom, take, tap, toArray } from 'rxjs';
import { builtinFamilies, Engine, type ChunkEvent, type SessionAction } from 'omnirx';

/** The action of each chunk; a change of direction flushes. */
const SCRIPT: SessionAction[] = [
  { key: 'none' },
  { key: 'right' },
  { key: 'right' },
  { key: 'up' },
  { key: 'up' },
  { key: 'left', id: 'turn-left' },
  { key: 'left' },
];

async function main(): Promise<void> {
  const engine = await Engine.create({ families: builtinFamilies(), tasks: ['WORLD'] });
  try {
    const session = await engine.session({ prompt: 'a white ball in a dark blue room with two yellow blocks', seed: 1, fps: 8 });
    const frames = session.params.width * session.params.height * 3;
    const chunks$ = session.events$.pipe(
      filter((e): e is ChunkEvent => e.type === 'chunk'),
      tap((c) => {
        const { chunk, action, ptsMs } = c.rollout!;
        const bytes = c.artifact.kind === 'video' ? c.artifact.frames.length : 0;
        console.log(
          `chunk ${chunk} at ${ptsMs} ms: ${action.key}${action.id ? ` (${action.id})` : ''}, ${bytes / frames} frame(s) of ${session.params.width}×${session.params.height}`,
        );
        // The next chunk may already be denoising with this chunk's action: set its own, and flush on a turn so the
        // chunk in flight is redone with it.
        const next = SCRIPT[chunk + 1];
        if (next !== undefined) {
          session.actions.next(next);
          if (next.key !== action.key) session.flush();
        }
        if (SCRIPT[chunk + 2] !== undefined) session.credits.next(1); // keep one chunk ahead
      }),
      take(SCRIPT.length),
      toArray(),
    );
    session.actions.next(SCRIPT[0]);
    session.credits.next(2); // one chunk ahead: 1 latent frame per chunk by default
    const chunks = await lastValueFrom(chunks$);
    session.close();
    await session.whenReleased();
    const keys = chunks.map((c) => c.rollout!.action.key);
    console.log(`session ${session.id}: ${chunks.length} chunks, actions ${keys.join(' ')}`);
    if (keys.at(-1) !== 'left') throw new Error('the last chunk did not follow the script');
  } finally {
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
