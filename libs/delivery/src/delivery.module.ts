import { Module } from '@nestjs/common';
import { DeliveryBus } from './delivery-bus';
import { DeliveryService } from './delivery.service';
import { OutboxStore } from './outbox-store';
import { WebhookWorker } from './webhook/webhook-worker';

@Module({
  providers: [DeliveryBus, OutboxStore, DeliveryService, WebhookWorker],
  exports: [DeliveryBus, OutboxStore, DeliveryService],
})
export class DeliveryModule {}
