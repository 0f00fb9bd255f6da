import { Injectable } from '@nestjs/common';

/** Set by main.ts once the gRPC server listens; read by the readiness check. */
@Injectable()
export class GrpcServerState {
  listening = false;
}
