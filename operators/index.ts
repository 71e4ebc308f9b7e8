/** The RxJS operators the planes are built from (docs/design.md §5). One operator per file. */
export { driveLoop, type DriveLoopOptions, type ReleaseReason, type StepOutcome } from './drive-loop';
export { creditGate } from './credit-gate';
export { concatMapWithLatest, type ConcatMapWithLatestOptions } from './concat-map-with-latest';
export { restartOn } from './restart-on';
