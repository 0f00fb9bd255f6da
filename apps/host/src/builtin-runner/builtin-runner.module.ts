import { Module } from '@nestjs/common';
import { HostApiModule } from '@libs/host-api';
import { RunnerGatewayModule } from '@libs/runner-gateway';
import { RunsModule } from '@libs/runs';
import { LocalAgentTransport } from './local-agent.transport';

/** The host's own runners, served in process through the in-process host API adapter. */
@Module({
  imports: [RunnerGatewayModule, HostApiModule, RunsModule],
  providers: [LocalAgentTransport],
  exports: [LocalAgentTransport],
})
export class BuiltinRunnerModule {}
