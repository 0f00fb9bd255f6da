/**
 * The dependency rule of `npm run lint` (docs/architecture.md#layers): no import cycles, libs never
 * import apps, test helpers stay in tests, and each lib imports only libs on its floor or below.
 */
const LAYERS = [
  ['protocol', 'proto', 'config', 'telemetry', 'streams'],
  ['persistence'],
  ['auth', 'authz', 'conversations', 'local-agent', 'cluster'],
  ['resources', 'runner-gateway'],
  ['agents'],
  ['delivery'],
  ['interactions'],
  ['runs'],
  ['host-api'],
];

const floorRules = LAYERS.flatMap((layer, i) => {
  const above = LAYERS.slice(i + 1).flat();
  if (above.length === 0) {
    return [];
  }
  return [
    {
      name: `floor-${layer.join('-')}`,
      comment: `${layer.join(', ')} may import only libs on their floor or below (docs/architecture.md#layers)`,
      severity: 'error',
      from: { path: `^libs/(${layer.join('|')})/` },
      to: { path: `^libs/(${above.join('|')}|runner-sdk)/` },
    },
  ];
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle: split the shared part into its own module.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'libs-not-apps',
      comment: 'A lib never imports an app.',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^apps/' },
    },
    {
      name: 'testing-only-in-tests',
      comment: '@libs/testing is for specs, e2e tests and benches.',
      severity: 'error',
      from: { path: '^(libs|apps)/', pathNot: ['\\.(spec|int-spec|e2e-spec)\\.ts$', '^libs/testing/', '/testing/'] },
      to: { path: '^libs/testing/' },
    },
    {
      name: 'runner-sdk-stands-alone',
      comment: 'The runner SDK is packed on its own: it depends on the generated proto types only.',
      severity: 'error',
      from: { path: '^libs/runner-sdk/src/', pathNot: '\\.spec\\.ts$' },
      to: { path: '^libs/', pathNot: '^libs/(runner-sdk|proto)/' },
    },
    {
      name: 'domain-not-proto',
      comment:
        'Domain libs use the protocol schemas of libs/protocol; generated proto code stops at the adapters (docs/architecture.md#conventions).',
      severity: 'error',
      // The host API's gRPC adapter converts proto <-> the action schemas: it is the edge, not the domain.
      from: {
        path: '^libs/(runs|delivery|host-api|local-agent)/',
        pathNot: ['\\.spec\\.ts$', '^libs/host-api/src/(host-api\\.grpc\\.ts|grpc/)'],
      },
      to: { path: '^libs/proto/' },
    },
    ...floorRules,
  ],
  options: {
    includeOnly: '^(libs|apps|bench|test|scripts)/',
    exclude: { path: ['^libs/proto/src/generated/', '^apps/console/'] },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['require', 'node', 'default'] },
    cache: false,
  },
};
