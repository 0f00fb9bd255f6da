import { serve } from '@runner-host/runner-sdk';
import { dify } from './dify';
import { webhook } from './webhook';

// `node dist/apps/runners/hosted-workflow/main.js` with RUNNERHOST_GRPC_URL,
// RUNNERHOST_PLUGIN_TOKEN, RUNNERHOST_PLUGIN_AUTHOR, RUNNERHOST_PLUGIN_NAME (docs/runner-sdk.md):
// two runners, `dify` and `webhook` (docs/reference-runners.md).
serve([dify, webhook]).catch((e: unknown) => {
  process.stderr.write(`hosted-workflow runner: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
