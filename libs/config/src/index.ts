export * from './app-config';
export * from './secret-env';
