import { InteractionsModule } from '@libs/interactions';
import { InteractionsService } from './interactions/interactions.service';
import { Module } from '@nestjs/common';
import { AgentsModule } from '@libs/agents';
import { AuthzModule } from '@libs/authz';
import { ClusterModule } from '@libs/cluster';
import { ConversationsModule } from '@libs/conversations';
import { DeliveryModule } from '@libs/delivery';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { ActiveRuns } from './active-runs';
import { RunGrants } from './run-grant';
import { StoredRunGrants } from './stored-run-grants';
import { AdmissionService } from './admission.service';
import { AdmissionCatalog } from './admission-catalog';
import { ResultIngestService } from './result-ingest.service';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunSteps } from './run-steps';
import { RunsDrain } from './runs-drain';
import { RunStreamBus } from './run-stream.bus';
import { RunsQueryService } from './runs-query.service';
import { RunFollowsService } from './run-follows.service';
import { ToolTelemetryForwarder } from './tool-telemetry';
import { RunStarter } from './run-start';
import { RunLeases } from './run-leases.service';
import { ConversationDispatcher } from './concurrency/conversation-dispatcher';
import { SteeringService } from './concurrency/steering.service';
import { SteeringAdminService } from './concurrency/steering-admin.service';
import { BusSignals, SIGNAL_PORT } from './concurrency/signal-port';
import { WorkspaceAdmission } from './workspace-admission';
import { WorkspaceQuotaGate } from './workspace-quotas';

@Module({
  imports: [
    AgentsModule,
    RunnerGatewayModule,
    AuthzModule,
    ConversationsModule,
    DeliveryModule,
    InteractionsModule,
    ClusterModule,
  ],
  providers: [
    ActiveRuns,
    // The host API's read-only way to an active run (docs/architecture.md#the-life-of-a-run),
    // this process's or another's (docs/scale-out.md#host-api-anywhere).
    StoredRunGrants,
    { provide: RunGrants, useExisting: StoredRunGrants },
    RunStreamBus,
    AdmissionCatalog,
    RunLifecycleService,
    { provide: RunSteps, useExisting: RunLifecycleService },
    ResultIngestService,
    InteractionsService,
    AdmissionService,
    RunsQueryService,
    RunFollowsService,
    ToolTelemetryForwarder,
    RunStarter,
    RunLeases,
    ConversationDispatcher,
    SteeringService,
    SteeringAdminService,
    { provide: SIGNAL_PORT, useClass: BusSignals },
    WorkspaceAdmission,
    WorkspaceQuotaGate,
    RunsDrain,
  ],
  exports: [
    RunsDrain,
    InteractionsService,
    AdmissionService,
    RunsQueryService,
    RunGrants,
    SteeringService,
    SteeringAdminService,
    WorkspaceAdmission,
    WorkspaceQuotaGate,
    AdmissionCatalog,
    RunLeases,
  ],
})
export class RunsModule {}
