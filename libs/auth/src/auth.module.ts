import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiKeyGuard } from './api-key.guard';
import { ApiKeysService } from './api-keys.service';
import { StreamTokenKeys, StreamTokensService } from './stream-tokens';

@Module({
  providers: [
    ApiKeysService,
    { provide: StreamTokenKeys, useExisting: ApiKeysService },
    StreamTokensService,
    { provide: APP_GUARD, useClass: ApiKeyGuard },
  ],
  exports: [ApiKeysService, StreamTokensService],
})
export class AuthModule {}
