export * from './request';
export * from './tokens';
export * from './submission';
export { InteractionsRepository } from './interactions.repository';
export { InteractionsModule } from './interactions.module';
export * from './elicitation';
