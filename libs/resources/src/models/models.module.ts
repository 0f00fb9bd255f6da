import { Module } from '@nestjs/common';
import { ModelRegistry } from './model-registry.service';
import { ModelsService } from './models.service';

@Module({ providers: [ModelRegistry, ModelsService], exports: [ModelsService, ModelRegistry] })
export class ModelsModule {}
