/**
 * The V8 flags the host process is started with: `npm start` runs
 * `node <HOST_NODE_FLAGS> dist/apps/host/src/main.js` (package.json, held to this list by
 * node-flags.spec.ts) and the benches start the host the same way (bench/common/host-process.ts).
 *
 * `--max-semi-space-size=32`: V8's young generation may grow to 2 × 32 MiB instead of the default
 * 2 × 16 MiB. A busy host allocates per run far more than survives it, so a larger nursery means
 * fewer scavenges for the same work: at SQLite c64, scavenges per 1,000 runs 19 → 11 and the
 * main thread's GC time per run −34 % (docs/benchmarks.md, "The host's young generation"), for up
 * to 32 MiB more resident memory. Heap sizes are fixed when V8 starts, so they belong to the start
 * command and not to `process.env` (docs/deployment.md#node-flags).
 */
export const HOST_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
