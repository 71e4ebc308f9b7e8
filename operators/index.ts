/** The RxJS operators the planes are built from (DESIGN.md §5). One operator per file. */
export { driveLoop, type DriveLoopOptions, type ReleaseReason, type StepOutcome } from './drive-loop';
