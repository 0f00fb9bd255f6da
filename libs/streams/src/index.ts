export { ReleasingMap, ReleasingSet } from './releasing-map';
export { RunChannels } from './run-channels';
export type { StreamEnd, StreamEvent, StreamItem, StreamSource } from './stream-source';
