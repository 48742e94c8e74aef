#!/usr/bin/env bash
# The panel's REST types (src/generated/openapi.ts) from the OpenAPI document (docs/openapi.json,
# `python -m jupyter_hyperpod.openapi`), by openapi-typescript, formatted as the rest of src/.
#   scripts/models.sh write   regenerate it (jlpm build:models)
#   scripts/models.sh check   fail when the committed file is not what the document makes (jlpm check:models)
# --default-non-nullable false: the document already lists every field a response always carries
# as required (openapi.py), so a field that is not required is one a request may leave out.
set -euo pipefail
cd "$(dirname "$0")/.."
target=src/generated/openapi.ts
made="$(mktemp)"
trap 'rm -f "$made"' EXIT
npx openapi-typescript docs/openapi.json --default-non-nullable false -o "$made.ts" >/dev/null
npx prettier --stdin-filepath "$target" <"$made.ts" >"$made"
rm -f "$made.ts"
case "${1:-check}" in
  write) mkdir -p "$(dirname "$target")"; cp "$made" "$target"; echo "wrote $target" ;;
  check)
    if ! cmp -s "$made" "$target"; then
      diff -u "$target" "$made" | head -40 >&2 || true
      echo "!! $target is not what docs/openapi.json makes: run jlpm build:models (after python -m jupyter_hyperpod.openapi > docs/openapi.json)" >&2
      exit 1
    fi ;;
  *) echo "usage: $0 write|check" >&2; exit 2 ;;
esac
