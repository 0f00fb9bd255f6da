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

@Module({
  imports: [AgentsModule, RunnerGatewayModule, AuthzModule, ConversationsModule, DeliveryModule],
  providers: [
    ActiveRuns,
    RunStreamBus,
    AdmissionCatalog,
    RunLifecycleService,
    ResultIngestService,
    AdmissionService,
    RunsQueryService,
    ToolTelemetryForwarder,
  ],
  exports: [AdmissionService, RunsQueryService, ActiveRuns],
})
export class RunsModule {}
