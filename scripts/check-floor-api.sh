#!/usr/bin/env bash
# Type-checks the panel (src/, not its tests) against the support floor's own packages: the
# `@jupyterlab/*` and `@lumino/*` packages it imports, at the lowest version of package.json's
# ranges (`^4.0.0` -> 4.0.0), fetched with `npm pack`; everything else resolves from node_modules.
# A name newer than the floor fails here unless src/compat.ts looks it up at run time
# (ui-components 4.0.0 has no `pauseIcon` or `expandIcon`, so the panel must not import them).
# Needs node_modules (jlpm install) and the npm registry. Usage: bash scripts/check-floor-api.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
node - "$root" <<'JS' >packages.txt
const fs = require('fs');
const path = require('path');
const root = process.argv[2];
const deps = require(path.join(root, 'package.json')).dependencies;
const used = new Set();
const walk = dir => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== '__tests__') walk(full);
    else if (/\.tsx?$/.test(entry.name)) {
      for (const m of fs.readFileSync(full, 'utf8').matchAll(/from '(@(?:jupyterlab|lumino)\/[a-z-]+)'/g)) used.add(m[1]);
    }
  }
};
walk(path.join(root, 'src'));
for (const name of [...used].sort()) {
  if (!deps[name]) { console.error(`${name} is imported but not in package.json dependencies`); process.exit(1); }
  console.log(`${name} ${deps[name].replace(/^[\^~]/, '')}`);
}
JS
paths='"*": ["'"$root"'/node_modules/*", "'"$root"'/node_modules/@types/*"]'
while read -r name version; do
  dir="floor/${name#@}"
  mkdir -p "$dir"
  tarball="$(npm pack -q "$name@$version" 2>/dev/null | tail -1)"
  tar xzf "$tarball" -C "$dir" --strip-components=1
  echo "floor: $name@$version"
  paths="\"$name\": [\"$work/$dir\"], $paths"
done <packages.txt
cat >tsconfig.json <<JSON
{
  "compilerOptions": {
    "allowSyntheticDefaultImports": true, "esModuleInterop": true, "jsx": "react",
    "lib": ["DOM", "DOM.Iterable", "ES2019", "ES2020.Intl"], "module": "esnext",
    "moduleResolution": "node", "noEmit": true, "resolveJsonModule": true, "skipLibCheck": true,
    "strict": true, "target": "ES2019", "types": [], "baseUrl": ".",
    "typeRoots": ["$root/node_modules/@types"], "paths": { $paths }
  },
  "include": ["$root/src/**/*"],
  "exclude": ["$root/src/__tests__"]
}
JSON
"$root/node_modules/.bin/tsc" -p tsconfig.json
echo "the panel type-checks against the floor's packages"
