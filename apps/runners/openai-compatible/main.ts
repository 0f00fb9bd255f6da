import { serve } from '@runner-host/runner-sdk';
import { openaiCompatible } from './runner';

// `node dist/apps/runners/openai-compatible/src/main.js` with RUNNERHOST_GRPC_URL,
// RUNNERHOST_PLUGIN_TOKEN, RUNNERHOST_PLUGIN_AUTHOR, RUNNERHOST_PLUGIN_NAME (docs/runner-sdk.md)
// and the API key variable the bindings name in `api_key_env` (docs/reference-runners.md).
serve([openaiCompatible]).catch((e: unknown) => {
  process.stderr.write(`openai-compatible runner: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
