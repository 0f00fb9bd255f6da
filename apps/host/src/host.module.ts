import { Global, Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { AgentsModule } from '@libs/agents';
import { AuthModule, OWNER_LOOKUP } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { AuthzModule } from '@libs/authz';
import { ClusterModule } from '@libs/cluster';
import { ConversationsModule } from '@libs/conversations';
import { DeliveryModule } from '@libs/delivery';
import { HostApiModule } from '@libs/host-api';
import { PersistenceModule } from '@libs/persistence';
import { ResourcesModule } from '@libs/resources';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { RunsModule } from '@libs/runs';
import { BuiltinRunnerModule } from './builtin-runner/builtin-runner.module';
import { AllExceptionsFilter } from './filters/all-exceptions.filter';
import { GrpcServerState } from './grpc-server-state';
import { AgentsController } from './http/admin/agents.controller';
import { AdminDeliveriesController } from './http/admin/deliveries.controller';
import { ApiKeysController } from './http/admin/api-keys.controller';
import { KnowledgeController } from './http/admin/knowledge.controller';
import { ModelsController } from './http/admin/models.controller';
import { PluginsController } from './http/admin/plugins.controller';
import { RunInspectionController } from './http/admin/run-inspection.controller';
import { RunnersController } from './http/admin/runners.controller';
import { SteeringController } from './http/admin/steering.controller';
import { ToolsController } from './http/admin/tools.controller';
import { ConversationsController } from './http/conversations.controller';
import { DeliveriesController } from './http/deliveries.controller';
import { SseStreams } from './http/sse-streams';
import { EventsController } from './http/events.controller';
import { HealthController } from './http/health.controller';
import { InteractionsController } from './http/interactions.controller';
import { RunsController } from './http/runs.controller';
import { MetricsEndpoint } from './telemetry/metrics-endpoint';
import { WorkspacesController } from './http/admin/workspaces.controller';
import { RouteOwners } from './http/owners';
import { WriteTenancy } from './http/tenancy';

@Global()
@Module({})
class ConfigModule {
  static of(config: AppConfig): DynamicModule {
    return {
      module: ConfigModule,
      providers: [{ provide: APP_CONFIG, useValue: config }, GrpcServerState],
      exports: [APP_CONFIG, GrpcServerState],
    };
  }
}

/** docs/tenancy.md#isolation: the API key guard (AuthModule) asks who owns a route's ids. */
@Global()
@Module({
  imports: [RunsModule],
  providers: [{ provide: OWNER_LOOKUP, useClass: RouteOwners }],
  exports: [OWNER_LOOKUP],
})
class RouteOwnersModule {}

/** The host process: HTTP API + gRPC runner gateway over one embedded (or PostgreSQL) database. */
@Module({})
export class HostModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: HostModule,
      imports: [
        ConfigModule.of(config),
        PersistenceModule.forRoot(),
        ClusterModule,
        RouteOwnersModule,
        AuthModule,
        RunnerGatewayModule,
        AgentsModule,
        RunsModule,
        AuthzModule,
        ConversationsModule,
        HostApiModule,
        ResourcesModule,
        DeliveryModule,
        BuiltinRunnerModule,
      ],
      controllers: [
        EventsController,
        RunsController,
        AgentsController,
        PluginsController,
        RunnersController,
        ApiKeysController,
        HealthController,
        RunInspectionController,
        ConversationsController,
        ToolsController,
        KnowledgeController,
        ModelsController,
        DeliveriesController,
        AdminDeliveriesController,
        SteeringController,
        InteractionsController,
        WorkspacesController,
      ],
      providers: [{ provide: APP_FILTER, useClass: AllExceptionsFilter }, SseStreams, MetricsEndpoint, WriteTenancy],
    };
  }
}
