import { Module } from '@nestjs/common';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { AgentsService } from './agents.service';

@Module({ imports: [RunnerGatewayModule], providers: [AgentsService], exports: [AgentsService] })
export class AgentsModule {}
