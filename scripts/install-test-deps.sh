#!/usr/bin/env bash
# Installs what the browser tests need and pip cannot: the system Chromium
# (Debian package `chromium`; never a browser downloaded by Playwright) and
# axe-core (npm, pinned) for the accessibility check, into .cache/ (not committed).
# Under CI=true anything missing afterwards is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
AXE_VERSION=4.14.1
CHROMIUM=/usr/bin/chromium
missing=0

if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  [ -x "$CHROMIUM" ] || { echo "chromium missing: apt-get install chromium" >&2; missing=1; }
fi

AXE=.cache/axe-core-$AXE_VERSION/node_modules/axe-core/axe.min.js
if [ ! -f "$AXE" ]; then
  if command -v npm >/dev/null; then
    echo "installing axe-core@$AXE_VERSION (npm)" >&2
    mkdir -p ".cache/axe-core-$AXE_VERSION"
    npm install --silent --no-audit --no-fund --prefix ".cache/axe-core-$AXE_VERSION" \
      "axe-core@$AXE_VERSION" >/dev/null
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    mkdir -p ".cache/axe-core-$AXE_VERSION"
    npm install --silent --no-audit --no-fund --prefix ".cache/axe-core-$AXE_VERSION" \
      "axe-core@$AXE_VERSION" >/dev/null
  fi
  [ -f "$AXE" ] || { echo "axe-core missing: npm install axe-core@$AXE_VERSION" >&2; missing=1; }
fi

if [ "$missing" = 1 ] && [ "${CI:-}" = "true" ]; then
  echo "CI=true: browser test dependencies missing" >&2
  exit 1
fi
exit 0
