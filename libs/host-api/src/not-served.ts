import { GrpcStatusError } from '@libs/runner-gateway';

/** A declared action this host does not serve yet (UNIMPLEMENTED on gRPC, runtime_error in process). */
export const notServed = (what: string): Promise<never> =>
  Promise.reject(GrpcStatusError.unimplemented(`${what} is not served by this host yet`));
