import { InitialSchema1764500000000 } from './1764500000000-initial-schema';
import { ContextStores1764600000000 } from './1764600000000-context-stores';
import { Resources1764700000000 } from './1764700000000-resources';
import { KbStemming1764800000000 } from './1764800000000-kb-stemming';
import { ConversationSteering1765000000000 } from './1765000000000-conversation-steering';
import { DeliveryOutbox1765100000000 } from './1765100000000-delivery-outbox';
import { ToolMetadata1765300000000 } from './1765300000000-tool-metadata';
import { RetentionIndexes1765400000000 } from './1765400000000-retention-indexes';
import { ConversationScope1765420000000 } from './1765420000000-conversation-scope';
import { Interactions1767000000000 } from './1767000000000-interactions';
import { ConversationWorkspace1767100000000 } from './1767100000000-conversation-workspace';
import { Workspaces1767200000000 } from './1767200000000-workspaces';
import { RunSnapshots1767400000000 } from './1767400000000-run-snapshots';
import { TranscriptIndexDeferred1767410000000 } from './1767410000000-transcript-index-deferred';
import { HostProcesses1767500000000 } from './1767500000000-host-processes';
import { RunLeases1767600000000 } from './1767600000000-run-leases';
import { RunnerPresence1767610000000 } from './1767610000000-runner-presence';
import { DeliverySenders1767630000000 } from './1767630000000-delivery-senders';
import { CatalogVersion1767640000000 } from './1767640000000-catalog-version';
import { RunningRunsByWorkspace1767650000000 } from './1767650000000-running-runs-by-workspace';
import { KbDocumentStatus1767660000000 } from './1767660000000-kb-document-status';
import { KbStoredTsvector1767670000000 } from './1767670000000-kb-stored-tsvector';
import { PendingDeliveryIdIndex1767690000000 } from './1767690000000-pending-delivery-id-index';
import { RowidIds1767700000000 } from './1767700000000-rowid-ids';
import { EventsIdempotencyPartial1767710000000 } from './1767710000000-events-idempotency-partial';
import { RunsConversationIndex1767720000000 } from './1767720000000-runs-conversation-index';
import { AuditRowidIds1767730000000 } from './1767730000000-audit-rowid-ids';
import { FenceFailure1767740000000 } from './1767740000000-fence-failure';
import { SpeculationCheck1767750000000 } from './1767750000000-speculation-check';

/** Every migration, oldest first; both dialects (each migration branches where SQL differs). */
export const MIGRATIONS = [
  InitialSchema1764500000000,
  ContextStores1764600000000,
  Resources1764700000000,
  KbStemming1764800000000,
  ConversationSteering1765000000000,
  DeliveryOutbox1765100000000,
  ToolMetadata1765300000000,
  RetentionIndexes1765400000000,
  ConversationScope1765420000000,
  Interactions1767000000000,
  ConversationWorkspace1767100000000,
  Workspaces1767200000000,
  RunSnapshots1767400000000,
  TranscriptIndexDeferred1767410000000,
  HostProcesses1767500000000,
  RunLeases1767600000000,
  RunnerPresence1767610000000,
  DeliverySenders1767630000000,
  CatalogVersion1767640000000,
  RunningRunsByWorkspace1767650000000,
  KbDocumentStatus1767660000000,
  KbStoredTsvector1767670000000,
  PendingDeliveryIdIndex1767690000000,
  RowidIds1767700000000,
  EventsIdempotencyPartial1767710000000,
  RunsConversationIndex1767720000000,
  AuditRowidIds1767730000000,
  FenceFailure1767740000000,
  SpeculationCheck1767750000000,
];
