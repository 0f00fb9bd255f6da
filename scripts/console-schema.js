// Generates apps/console/src/api/schema.d.ts from the OpenAPI document the built host serves
// (the generated-client path of test/e2e/openapi-contract.e2e-spec.ts): boots dist/ on free ports
// with a throwaway SQLite directory, fetches /openapi.json, runs openapi-typescript, stops the host.
// The console is then type-checked against it, so an API change under the console breaks the build.
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const out = path.join(root, 'apps', 'console', 'src', 'api', 'schema.d.ts');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function main() {
  const [port, grpcPort] = [await freePort(), await freePort()];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-schema-'));
  const host = spawn(process.execPath, [path.join(root, 'dist/apps/host/src/main.js')], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      GRPC_HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      ADMIN_API_KEY: `schema-${process.pid}-${Date.now()}-0123456789abcdef`,
      LOG_LEVEL: 'error',
      METRICS: 'off', // a build must not need the metrics port
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let exited = false;
  host.on('exit', () => (exited = true));
  try {
    const url = `http://127.0.0.1:${port}/openapi.json`;
    let doc;
    for (let i = 0; i < 600 && !doc; i++) {
      if (exited) {
        throw new Error('the host exited before serving /openapi.json');
      }
      try {
        const res = await fetch(url);
        if (res.ok) {
          doc = await res.text();
        }
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    if (!doc) {
      throw new Error('the host did not serve /openapi.json within 60 s');
    }
    const json = path.join(dataDir, 'openapi.json');
    fs.writeFileSync(json, doc);
    const cli = path.join(root, 'node_modules', 'openapi-typescript', 'bin', 'cli.js');
    // Same flags as the contract test: request fields the host defaults are optional to send.
    execFileSync(process.execPath, [cli, json, '--default-non-nullable=false', '-o', out], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    process.stdout.write(`console: API types generated from the served /openapi.json → ${path.relative(root, out)}\n`);
  } finally {
    host.kill('SIGTERM');
    await new Promise((r) => (exited ? r() : host.once('exit', r)));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`console-schema: ${e.message}\n`);
  process.exit(1);
});
