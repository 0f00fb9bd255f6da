import { Controller } from '@nestjs/common';
import type { Metadata } from '@grpc/grpc-js';
import type { Observable } from 'rxjs';
import {
  RunnerGatewayServiceControllerMethods,
  type HostMessage,
  type PluginMessage,
  type RunnerGatewayServiceController,
} from '@libs/proto';
import { ConnectSessionHandler } from './connect-session.handler';

@Controller()
@RunnerGatewayServiceControllerMethods()
export class RunnerGatewayController implements RunnerGatewayServiceController {
  constructor(private readonly sessions: ConnectSessionHandler) {}

  connect(request: Observable<PluginMessage>, metadata?: Metadata): Observable<HostMessage> {
    return this.sessions.open(request, metadata);
  }
}
