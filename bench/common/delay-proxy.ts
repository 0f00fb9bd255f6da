import * as net from 'node:net';
import { parseArgs } from 'node:util';
import { runMain, UsageError } from './cli';

/*
 * A TCP proxy that holds every chunk for a fixed delay in each direction: a database "one network
 * hop away" on a machine that has only loopback (no netem here). The delay is a Node timer, so at
 * least ≈ 1 ms each way (a round trip ≥ 2 ms, a cross-zone figure rather than a same-rack one);
 * chunks keep their order (equal delays fire in order). For A/B pairs of what a change does to
 * round trips, not for absolute figures (docs/benchmarks.md, round 17):
 *
 *   node dist/bench/common/delay-proxy.js --listen 15432 --to 127.0.0.1:5432 --delay-ms 1 &
 *   node dist/bench/dispatch/main.js --db postgres --pg-url postgres://postgres@127.0.0.1:15432/postgres …
 */

const USAGE = `usage: node dist/bench/common/delay-proxy.js --listen PORT --to HOST:PORT [--delay-ms N]
  --listen PORT   the port to listen on (127.0.0.1)
  --to HOST:PORT  where to forward
  --delay-ms N    milliseconds each chunk is held, each way (default 1)`;

function relay(from: net.Socket, to: net.Socket, delayMs: number): void {
  from.on('data', (chunk) => {
    setTimeout(() => {
      if (!to.destroyed) {
        to.write(chunk);
      }
    }, delayMs);
  });
  from.on('end', () => setTimeout(() => to.end(), delayMs));
  from.on('error', () => to.destroy());
  from.on('close', () => setTimeout(() => to.destroy(), delayMs));
}

runMain(async () => {
  const { values } = parseArgs({
    options: { listen: { type: 'string' }, to: { type: 'string' }, 'delay-ms': { type: 'string' } },
  });
  const listen = Number(values.listen);
  const [host, portText] = (values.to ?? '').split(':');
  const port = Number(portText);
  const delayMs = Number(values['delay-ms'] ?? '1');
  if (!Number.isInteger(listen) || listen <= 0 || !host || !Number.isInteger(port) || !(delayMs >= 0)) {
    throw new UsageError('--listen PORT and --to HOST:PORT are required, --delay-ms a number ≥ 0');
  }
  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const upstream = net.connect(port, host);
    upstream.setNoDelay(true);
    relay(client, upstream, delayMs);
    relay(upstream, client, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(listen, '127.0.0.1', resolve));
  process.stderr.write(`delay-proxy: 127.0.0.1:${listen} → ${host}:${port}, ${delayMs} ms each way\n`);
  await new Promise(() => undefined);
  return 0;
}, USAGE);
