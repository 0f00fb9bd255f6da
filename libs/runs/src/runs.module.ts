import { InteractionsModule } from '@libs/interactions';
import { InteractionsService } from './interactions/interactions.service';
import { Module } from '@nestjs/common';
import { AgentsModule } from '@libs/agents';
import { AuthzModule } from '@libs/authz';
import { ConversationsModule } from '@libs/conversations';
import { DeliveryModule } from '@libs/delivery';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { ActiveRuns } from './active-runs';
import { AdmissionService } from './admission.service';
import { AdmissionCatalog } from './admission-catalog';
import { ResultIngestService } from './result-ingest.service';
import { RunLifecycleService } from './run-lifecycle.service';
import { RunStreamBus } from './run-stream.bus';
import { RunsQueryService } from './runs-query.service';
import { ToolTelemetryForwarder } from './tool-telemetry';
import { RunStarter } from './run-start';
import { ConversationDispatcher } from './concurrency/conversation-dispatcher';
import { SteeringService } from './concurrency/steering.service';
import { SteeringAdminService } from './concurrency/steering-admin.service';
import { InProcessSignals, SIGNAL_PORT } from './concurrency/signal-port';
import { WorkspaceAdmission } from './workspace-admission';
import { WorkspaceQuotaGate } from './workspace-quotas';

@Module({
  imports: [AgentsModule, RunnerGatewayModule, AuthzModule, ConversationsModule, DeliveryModule, InteractionsModule],
  providers: [
    ActiveRuns,
    RunStreamBus,
    AdmissionCatalog,
    RunLifecycleService,
    ResultIngestService,
    InteractionsService,
    AdmissionService,
    RunsQueryService,
    ToolTelemetryForwarder,
    RunStarter,
    ConversationDispatcher,
    SteeringService,
    SteeringAdminService,
    { provide: SIGNAL_PORT, useClass: InProcessSignals },
    WorkspaceAdmission,
    WorkspaceQuotaGate,
  ],
  exports: [
    InteractionsService,
    AdmissionService,
    RunsQueryService,
    ActiveRuns,
    SteeringService,
    SteeringAdminService,
    WorkspaceAdmission,
    WorkspaceQuotaGate,
    AdmissionCatalog,
  ],
})
export class RunsModule {}
