export * from './log-levels';
export * from './metrics';
export * from './metrics-server';
export * from './telemetry';
export * from './tracing';
