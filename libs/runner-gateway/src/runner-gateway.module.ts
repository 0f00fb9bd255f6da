import { Module } from '@nestjs/common';
import { ClusterModule } from '@libs/cluster';
import { ConnectSessionHandler } from './connect-session.handler';
import { RunnerDispatch } from './dispatch/runner-dispatch';
import { GrpcHealthController } from './grpc-health.controller';
import { PluginsService } from './plugins.service';
import { RunnerConnections } from './runner-connections';
import { RunnerPresence } from './runner-presence';
import { RunnerCatalogService } from './runner-catalog.service';

@Module({
  imports: [ClusterModule],
  // Connect is served by a grpc-js handler directly (connect.grpc.ts, wired in the host's main.ts).
  controllers: [GrpcHealthController],
  providers: [
    PluginsService,
    RunnerConnections,
    RunnerDispatch,
    ConnectSessionHandler,
    RunnerCatalogService,
    RunnerPresence,
  ],
  exports: [
    ConnectSessionHandler,
    PluginsService,
    RunnerConnections,
    RunnerDispatch,
    RunnerCatalogService,
    RunnerPresence,
  ],
})
export class RunnerGatewayModule {}
