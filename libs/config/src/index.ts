export * from './app-config';
export * from './secret-env';
export * from './browser-config';
export * from './node-flags';
