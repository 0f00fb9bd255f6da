import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Transport, type MicroserviceOptions } from '@nestjs/microservices';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { ConfigError, loadConfig, type AppConfig } from '@libs/config';
import { LOADER_OPTIONS, protoPath } from '@libs/proto';
import { grpcMessageLimit } from '@libs/host-api';
import { HOST_VERSION, tolerateMalformedRequests } from '@libs/runner-gateway';
import { validationPipe } from './filters/validation';
import { GrpcServerState } from './grpc-server-state';
import { HostModule } from './host.module';

function configOrExit(): AppConfig {
  try {
    return loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`runner-host: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
}

async function bootstrap(): Promise<void> {
  const config = configOrExit();
  const app = await NestFactory.create<NestExpressApplication>(HostModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  app.useBodyParser('json', { limit: '5mb' });
  app.useGlobalPipes(validationPipe());
  app.enableShutdownHooks();

  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Runner Host')
      .setDescription('Host side of an agent platform: events in, runs on runner plugins over gRPC, results out.')
      .setVersion(HOST_VERSION)
      .addBearerAuth()
      .build(),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json' });

  app.connectMicroservice<MicroserviceOptions>(
    {
      transport: Transport.GRPC,
      options: {
        url: `${config.grpc.host}:${config.grpc.port}`,
        package: ['runnerhost.v1', 'grpc.health.v1'],
        protoPath: protoPath(),
        loader: LOADER_OPTIONS,
        // Above every host-API limit, so that the guard (not grpc-js) refuses and audits a request
        // a little over it; malformed requests become INVALID_ARGUMENT, not INTERNAL.
        maxReceiveMessageLength: grpcMessageLimit(config),
        maxSendMessageLength: grpcMessageLimit(config),
        onLoadPackageDefinition: tolerateMalformedRequests,
      },
    },
    { inheritAppConfig: true },
  );
  await app.init();
  await app.startAllMicroservices();
  app.get(GrpcServerState).listening = true;
  await app.listen(config.http.port, config.http.host);
  app
    .get(Logger)
    .log(
      `runner-host listening: http ${config.http.host}:${config.http.port}, grpc ${config.grpc.host}:${config.grpc.port}, database ${config.database.type}`,
    );
}

void bootstrap();
