import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { InteractionEntity } from '@libs/persistence';
import { InteractionsRepository } from './interactions.repository';

@Module({
  imports: [TypeOrmModule.forFeature([InteractionEntity])],
  providers: [InteractionsRepository],
  exports: [InteractionsRepository],
})
export class InteractionsModule {}
