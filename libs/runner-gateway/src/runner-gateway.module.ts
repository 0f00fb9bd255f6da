import { Module } from '@nestjs/common';
import { ConnectSessionHandler } from './connect-session.handler';
import { RunnerDispatch } from './dispatch/runner-dispatch';
import { GrpcHealthController } from './grpc-health.controller';
import { PluginsService } from './plugins.service';
import { RunnerConnections } from './runner-connections';
import { RunnerCatalogService } from './runner-catalog.service';
import { RunnerGatewayController } from './runner-gateway.controller';

@Module({
  controllers: [RunnerGatewayController, GrpcHealthController],
  providers: [PluginsService, RunnerConnections, RunnerDispatch, ConnectSessionHandler, RunnerCatalogService],
  exports: [PluginsService, RunnerConnections, RunnerDispatch, RunnerCatalogService],
})
export class RunnerGatewayModule {}
