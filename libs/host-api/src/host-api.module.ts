import { Module } from '@nestjs/common';
import { AuthzModule } from '@libs/authz';
import { ConversationsModule } from '@libs/conversations';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { RunsModule } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostActions } from './host-actions';
import { HostApiGate } from './host-api.gate';
import { HostApiGrpc } from './host-api.grpc';
import { StorageApiService } from './storage-api.service';

@Module({
  imports: [AuthzModule, ConversationsModule, RunnerGatewayModule, RunsModule],
  // HostApiGrpc is served on the gRPC server by serveHostApi (apps/host main), not as a controller.
  providers: [HostApiGate, HostActions, HostApiGrpc, ContextApiService, StorageApiService],
  exports: [HostActions, HostApiGrpc],
})
export class HostApiModule {}
