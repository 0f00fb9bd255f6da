import { InitialSchema1764500000000 } from './1764500000000-initial-schema';

/** Every migration, oldest first; both dialects (each migration branches where SQL differs). */
export const MIGRATIONS = [InitialSchema1764500000000];
