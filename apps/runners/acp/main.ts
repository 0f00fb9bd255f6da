import { serve } from '@runner-host/runner-sdk';
import { acp } from './runner';

// `node dist/apps/runners/acp/main.js` with RUNNERHOST_GRPC_URL, RUNNERHOST_PLUGIN_TOKEN,
// RUNNERHOST_PLUGIN_AUTHOR, RUNNERHOST_PLUGIN_NAME (docs/runner-sdk.md); the agent command is
// the binding's config (docs/reference-runners.md#acp-runner).
serve([acp]).catch((e: unknown) => {
  process.stderr.write(`acp runner: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
