import { Module } from '@nestjs/common';
import { AuthzModule } from '@libs/authz';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { AgentsService } from './agents.service';

@Module({ imports: [RunnerGatewayModule, AuthzModule], providers: [AgentsService], exports: [AgentsService] })
export class AgentsModule {}
