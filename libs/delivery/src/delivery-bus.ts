import { Injectable } from '@nestjs/common';
import { RunChannels } from '@libs/streams';
import type { DeliveryOp } from './ops';

/** Each active run's committed delivery ops, fanned out to its live deliveries-SSE readers. */
@Injectable()
export class DeliveryBus extends RunChannels<DeliveryOp> {}
