export { DeliveryModule } from './delivery.module';
export { DeliveryService, type DeliveryHost } from './delivery.service';
export { DeliveryAdminService, type OutboxPage } from './delivery-admin.service';
export { DeliveryBus } from './delivery-bus';
export { OutboxStore, opOf } from './outbox-store';
export { RunDelivery, planOf, type RunDeliveryView } from './run-delivery';
export { deliveryPlan, type DeliveryPlan, type DeliveryMode } from './plan';
export { normalise, initialState, type NormaliserState, type NormaliserInput } from './delivery-normaliser';
export {
  DELIVERY_OP_TYPES,
  HUGE_OPS_TEXT,
  deliveryId,
  hugeOps,
  idempotencyKey,
  opJson,
  type DeliveryOp,
  type DeliveryOpType,
} from './ops';
export { splitText, measure, graphemeEnds, type SizeUnit } from './split';
export { textOf } from './message-content';
export {
  ACTION_STYLES,
  FIELD_TYPES,
  SURFACE_PRESETS,
  deliveryContextOf,
  deliveryRequestSchema,
  interactionCapabilitiesSchema,
  surfacePreset,
  type DeliveryContext,
  type DeliveryRequest,
  type InteractionDeliveryCapabilities,
  type SurfacePreset,
} from './surfaces';
export { WebhookWorker, type SenderIdentity } from './webhook/webhook-worker';
export { WEBHOOK_HEADERS, signature, signedString, verifySignature } from './webhook/signature';
export { backoffMs } from './webhook/backoff';
export { isPrivateAddress } from './webhook/address-guard';
