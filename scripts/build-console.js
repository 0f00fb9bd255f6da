// Builds the admin console (apps/console, docs/console.md) into dist/console, after the host:
//   1. API types from the OpenAPI document the built host serves (scripts/console-schema.js);
//   2. strict tsc of the console against them: an API change under the console breaks the build;
//   3. vite build (Preact, JSX by Vite's own transformer; everything bundled, no CDN), base /console/;
//   4. the bundle size, raw and gzipped.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const root = path.resolve(__dirname, '..');
const app = path.join(root, 'apps', 'console');
const outDir = path.join(root, 'dist', 'console');

async function main() {
  execFileSync(process.execPath, [path.join(__dirname, 'console-schema.js')], { stdio: 'inherit' });
  execFileSync(
    process.execPath,
    [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(app, 'tsconfig.json')],
    {
      stdio: 'inherit',
    },
  );
  const { build } = await import('vite');
  await build({
    root: app,
    base: '/console/',
    configFile: false,
    logLevel: 'warn',
    // Preact's automatic JSX runtime (tsconfig: jsx react-jsx, jsxImportSource preact): no plugin needed.
    oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
    build: {
      outDir,
      emptyOutDir: true,
      target: 'es2023',
      sourcemap: false,
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      reportCompressedSize: false,
    },
  });
  let raw = 0;
  let gz = 0;
  const lines = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        walk(p);
      } else {
        const body = fs.readFileSync(p);
        const z = zlib.gzipSync(body, { level: 9 }).length;
        raw += body.length;
        gz += z;
        lines.push(
          `  ${path.relative(outDir, p).padEnd(40)} ${(body.length / 1024).toFixed(1).padStart(7)} KiB  ${(z / 1024).toFixed(1).padStart(6)} KiB gzip`,
        );
      }
    }
  };
  walk(outDir);
  process.stdout.write(
    `console bundle (dist/console):\n${lines.join('\n')}\n  total ${(raw / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzip\n`,
  );
}

main().catch((e) => {
  process.stderr.write(`build-console: ${e.stack ?? e}\n`);
  process.exit(1);
});
