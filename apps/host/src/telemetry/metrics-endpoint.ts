import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { MetricsServer, telemetry } from '@libs/telemetry';

/** Serves the process's metrics on METRICS_HOST:METRICS_PORT while the host runs (METRICS=on). */
@Injectable()
export class MetricsEndpoint implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Metrics');
  private server: MetricsServer | null = null;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async onApplicationBootstrap(): Promise<void> {
    const metrics = telemetry.metrics;
    if (!this.config.metrics || !metrics) {
      return;
    }
    this.server = new MetricsServer(metrics);
    const { host, port } = this.config.metrics;
    const bound = await this.server.listen(port, host).catch((e: unknown) => {
      throw new Error(`METRICS_PORT: cannot listen on ${host}:${port} (${e instanceof Error ? e.message : String(e)})`);
    });
    this.logger.log(`metrics: GET http://${host}:${bound}/metrics (host_instance ${this.config.instanceId})`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.server?.close();
    await telemetry.tracing.shutdown(); // the spans still buffered go out
  }
}
