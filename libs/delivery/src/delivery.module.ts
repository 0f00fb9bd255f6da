import { Module } from '@nestjs/common';
import { ClusterModule } from '@libs/cluster';
import { DeliveryAdminService } from './delivery-admin.service';
import { DeliveryBus } from './delivery-bus';
import { DeliveryService } from './delivery.service';
import { OutboxStore } from './outbox-store';
import { WebhookWorker } from './webhook/webhook-worker';

@Module({
  imports: [ClusterModule],
  providers: [DeliveryBus, OutboxStore, DeliveryService, DeliveryAdminService, WebhookWorker],
  exports: [DeliveryBus, OutboxStore, DeliveryService, DeliveryAdminService, WebhookWorker],
})
export class DeliveryModule {}
