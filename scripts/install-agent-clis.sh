#!/usr/bin/env bash
# Install the agent CLIs pinned in agent-clis.txt into a cache folder, one npm prefix each:
#   .cache/agent-clis/<package with / as +>/<version>/node_modules/.bin/<binary>
# Idempotent: a version already installed is left alone. AGENT_CLIS_CACHE overrides the folder.
# Prints nothing on success when everything was already there.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${AGENT_CLIS_CACHE:-$PWD/.cache/agent-clis}"
command -v npm >/dev/null || { echo "install-agent-clis: npm is not installed" >&2; exit 1; }
while IFS= read -r line; do
  line="${line%%#*}"; line="$(echo "$line" | tr -d '[:space:]')"
  [ -z "$line" ] && continue
  pkg="${line%==*}"; version="${line##*==}"
  [ "$pkg" = "$line" ] && { echo "install-agent-clis: '$line' is not name==version" >&2; exit 1; }
  prefix="$cache/${pkg//\//+}/$version"
  if [ -f "$prefix/.installed" ]; then continue; fi
  echo "install-agent-clis: installing $pkg@$version into $prefix" >&2
  rm -rf "$prefix.tmp"; mkdir -p "$prefix.tmp"
  npm install --prefix "$prefix.tmp" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2
  rm -rf "$prefix"; mv "$prefix.tmp" "$prefix"
  touch "$prefix/.installed"
done < agent-clis.txt
