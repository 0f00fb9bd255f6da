#!/usr/bin/env bash
# Packs the SDK (npm pack), installs the tarball into an empty project next to nothing but its
# dependencies (@grpc/grpc-js, @grpc/proto-loader, linked from the repository's node_modules),
# typechecks a consumer against the packed .d.ts files and runs it: the fake host runs a runner,
# and the packed .proto files load. No registry access.
set -euo pipefail
pkg="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$pkg/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$pkg" && npm pack --silent --pack-destination "$work" >/dev/null)
mkdir -p "$work/app/node_modules/@runner-host/runner-sdk" "$work/app/node_modules/@types"
tar -xzf "$work"/runner-host-runner-sdk-*.tgz -C "$work/app/node_modules/@runner-host/runner-sdk" --strip-components=1
# The SDK's dependencies and theirs (what npm would install), from the repository's node_modules.
for dep in @grpc protobufjs long lodash.camelcase yargs yargs-parser cliui y18n escalade get-caller-file require-directory string-width strip-ansi ansi-regex emoji-regex is-fullwidth-code-point wrap-ansi ansi-styles color-convert color-name @protobufjs @js-sdsl @types/node undici-types; do
  if [ -e "$repo/node_modules/$dep" ]; then ln -s "$repo/node_modules/$dep" "$work/app/node_modules/$dep"; fi
done
cat > "$work/app/consumer.ts" <<'TS'
import { defineRunner, protoDir } from '@runner-host/runner-sdk';
import { FakeHost } from '@runner-host/runner-sdk/testing';

const echo = defineRunner({
  name: 'default',
  async run(ctx, io) {
    await io.delta(ctx.input?.text ?? '');
    await io.completed();
  },
});

async function main(): Promise<void> {
  const outcome = await new FakeHost({ runners: [echo] }).run({ text: 'packed' });
  if (outcome.status !== 'completed' || outcome.messages[0] !== 'packed') {
    throw new Error(`unexpected outcome ${JSON.stringify(outcome)}`);
  }
  console.log(`ok: ${outcome.results.length} results; proto from ${protoDir()}`);
}
void main();
TS
cat > "$work/app/tsconfig.json" <<'JSON'
{ "compilerOptions": { "module": "commonjs", "target": "ES2022", "strict": true, "types": ["node"], "outDir": "out", "skipLibCheck": false } }
JSON
(cd "$work/app" && "$repo/node_modules/.bin/tsc" -p tsconfig.json && node out/consumer.js && node -e "
  const sdk = require('@runner-host/runner-sdk');
  const dir = sdk.protoDir({});
  if (!dir.startsWith(process.cwd())) { throw new Error('proto not from the package: ' + dir); }
  sdk.loadServices();
  console.log('ok: services load from the packed proto/');
")
echo "pack-check: the packed SDK installs, typechecks and runs on its own"
