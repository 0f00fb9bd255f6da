import { InitialSchema1764500000000 } from './1764500000000-initial-schema';
import { ContextStores1764600000000 } from './1764600000000-context-stores';

/** Every migration, oldest first; both dialects (each migration branches where SQL differs). */
export const MIGRATIONS = [InitialSchema1764500000000, ContextStores1764600000000];
