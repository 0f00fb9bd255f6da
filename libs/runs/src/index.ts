export { RunsModule } from './runs.module';
export { AdmissionService, type Admission } from './admission.service';
export { RunsQueryService } from './runs-query.service';
export { ActiveRuns } from './active-runs';
export type { ActiveRun, ActiveRunView } from './active-run';
export type { ResultView } from './run-stream.bus';
export { runView, type RunView } from './run-view';
export type { EventSubmission, ContentElementInput, AttachmentInput } from './event-submission';
