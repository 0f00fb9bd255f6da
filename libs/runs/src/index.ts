export { RunsModule } from './runs.module';
export { AdmissionService, type Admission } from './admission.service';
export { RunsQueryService, type RunStreamKind } from './runs-query.service';
export { RunGrants, type RunGrant, type CallBudget } from './run-grant';
export { RESULT_EVENTS, type ResultView } from './run-stream.bus';
export { runView, type RunView } from './run-view';
export type {
  EventSubmission,
  ContentElementInput,
  AttachmentInput,
  InteractionInput,
  InteractionSubmission,
} from './event-submission';
export {
  TRIGGER_SOURCES,
  EVENT_TYPE_PATTERN,
  PLATFORM_ID_PATTERN,
  submitEventSchema,
  interactionSubmissionSchema,
} from './event-submission';
export { InteractionsService, type InteractionView, type SubmitOutcome } from './interactions/interactions.service';
export { SteeringService } from './concurrency/steering.service';
export { SteeringAdminService, type SteeringView, type TimelineView } from './concurrency/steering-admin.service';
export { CONCURRENCY_MODES, MAX_STEERING_QUEUE, type ConcurrencyMode } from './concurrency/concurrency';
export { SIGNAL_PORT, type SignalPort, type Signal } from './concurrency/signal-port';
export { WorkspaceAdmission } from './workspace-admission';
export { WorkspaceQuotaGate, quotaExceeded } from './workspace-quotas';
export { AdmissionCatalog } from './admission-catalog';
export { RunsDrain } from './runs-drain';
export { RunLeases } from './run-leases.service';
