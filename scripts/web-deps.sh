#!/usr/bin/env bash
# Install examples/web's npm packages (onnxruntime-web for the page, puppeteer-core for its
# browser check) from package-lock.json with `npm ci`, once per lock file, into a cache, and link
# them as TREE/examples/web/node_modules. Install scripts are not run (neither package needs one,
# and nothing may download a browser).
# usage: scripts/web-deps.sh [TREE]   (default: this checkout)
set -euo pipefail
tree=$(cd "${1:-$(dirname "$0")/..}" && pwd)
web=$tree/examples/web
store=${SIGNFLOW_WEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/signflow/web}
key=$(sha256sum "$web/package-lock.json" | cut -c1-16)
dir=$store/$key
if [ ! -d "$dir/node_modules" ]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  cp "$web/package.json" "$web/package-lock.json" "$dir.tmp/"
  (cd "$dir.tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
if [ -d "$web/node_modules" ] && [ ! -L "$web/node_modules" ]; then
  echo "web: $web/node_modules is a directory of its own; using it as it is"
  exit 0
fi
ln -sfn "$dir/node_modules" "$web/node_modules"
echo "web: examples/web/node_modules -> $dir/node_modules"
