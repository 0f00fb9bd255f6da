import { Module } from '@nestjs/common';
import { AuthzModule } from '@libs/authz';
import { ConversationsModule } from '@libs/conversations';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { RunsModule } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostActions } from './host-actions';
import { HostApiGate } from './host-api.gate';
import { HostApiController } from './host-api.grpc';
import { StorageApiService } from './storage-api.service';

@Module({
  imports: [AuthzModule, ConversationsModule, RunnerGatewayModule, RunsModule],
  controllers: [HostApiController],
  providers: [HostApiGate, HostActions, ContextApiService, StorageApiService],
  exports: [HostActions],
})
export class HostApiModule {}
