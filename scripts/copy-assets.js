// Copies the .proto files next to the compiled code so `protoPath()` resolves in dist/ too.
const fs = require('node:fs');
const path = require('node:path');
const root = path.resolve(__dirname, '..');
fs.cpSync(path.join(root, 'proto'), path.join(root, 'dist', 'proto'), {
  recursive: true,
  filter: (src) => fs.statSync(src).isDirectory() || src.endsWith('.proto'),
});
