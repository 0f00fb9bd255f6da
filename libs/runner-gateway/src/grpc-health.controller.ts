import { Controller, UseInterceptors } from '@nestjs/common';
import { GrpcMethod } from '@nestjs/microservices';
import { of, type Observable } from 'rxjs';
import { health } from '@libs/proto';
import { MalformedRequestInterceptor } from './malformed-request';

const SERVICES = new Set(['', 'runnerhost.v1.RunnerGatewayService', 'runnerhost.v1.HostApiService']);

/** Standard grpc.health.v1.Health: SERVING for the whole server and each runnerhost service. */
@Controller()
@UseInterceptors(MalformedRequestInterceptor)
export class GrpcHealthController {
  @GrpcMethod('Health', 'Check')
  check(request: health.HealthCheckRequest): health.HealthCheckResponse {
    return { status: this.statusOf(request.service) };
  }

  @GrpcMethod('Health', 'Watch')
  watch(request: health.HealthCheckRequest): Observable<health.HealthCheckResponse> {
    return of({ status: this.statusOf(request.service) });
  }

  private statusOf(service: string): health.HealthCheckResponse_ServingStatus {
    return SERVICES.has(service)
      ? health.HealthCheckResponse_ServingStatus.SERVING
      : health.HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN;
  }
}
