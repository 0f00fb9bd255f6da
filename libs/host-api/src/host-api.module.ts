import { Module } from '@nestjs/common';
import { AuthzModule } from '@libs/authz';
import { ConversationsModule } from '@libs/conversations';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { RunsModule } from '@libs/runs';
import { ContextApiService } from './context-api.service';
import { HostApiController } from './host-api.controller';
import { HostApiGuard } from './host-api.guard';
import { StorageApiService } from './storage-api.service';

@Module({
  imports: [AuthzModule, ConversationsModule, RunnerGatewayModule, RunsModule],
  controllers: [HostApiController],
  providers: [HostApiGuard, ContextApiService, StorageApiService],
})
export class HostApiModule {}
