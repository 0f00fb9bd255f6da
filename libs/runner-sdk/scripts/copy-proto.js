// Copies the Runner Protocol .proto files of the repository into the package (proto/), where
// src/wire.ts finds them at run time once packed.
const fs = require('node:fs');
const path = require('node:path');
const pkg = path.resolve(__dirname, '..');
const from = path.resolve(pkg, '..', '..', 'proto', 'runnerhost');
fs.cpSync(from, path.join(pkg, 'proto', 'runnerhost'), {
  recursive: true,
  filter: (src) => fs.statSync(src).isDirectory() || src.endsWith('.proto'),
});
