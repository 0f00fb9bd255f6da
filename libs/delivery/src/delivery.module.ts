import { Module } from '@nestjs/common';
import { DeliveryAdminService } from './delivery-admin.service';
import { DeliveryBus } from './delivery-bus';
import { DeliveryService } from './delivery.service';
import { OutboxStore } from './outbox-store';
import { WebhookWorker } from './webhook/webhook-worker';

@Module({
  providers: [DeliveryBus, OutboxStore, DeliveryService, DeliveryAdminService, WebhookWorker],
  exports: [DeliveryBus, OutboxStore, DeliveryService, DeliveryAdminService],
})
export class DeliveryModule {}
