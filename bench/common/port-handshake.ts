import * as grpc from '@grpc/grpc-js';
import type { Child } from './proc';

/*
 * How a bench starts a bare server (a floor) as a child process: the child binds a free loopback
 * port and prints it as the first line of its stdout; it exits when its stdin ends (the bench
 * died) or on SIGTERM.
 */

/** Child side: binds `server`, prints the port, and stops with the parent. */
export function serveForParent(server: grpc.Server, name: string): void {
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`${name}: ${err.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`${port}\n`);
  });
  const stop = (): void => {
    server.forceShutdown();
    process.exit(0);
  };
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  process.stdin.resume();
  process.on('SIGTERM', stop);
}

/** Parent side: the port the child printed (spawn it with stdio ['pipe', 'pipe', …]). */
export function readPort(child: Child, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`${child.name}: no port after ${timeoutMs} ms`)), timeoutMs);
    child.proc.stdout?.setEncoding('utf8');
    child.proc.stdout?.on('data', (chunk: string) => {
      text += chunk;
      const m = /^(\d+)\n/.exec(text);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    void child.exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${child.name} exited (${child.exitStatus ?? '?'}) before listening`));
    });
  });
}
