#!/usr/bin/env bash
# Installs what the tests need and pip cannot: the system Chromium (Debian
# package `chromium`; never a browser downloaded by Playwright) and axe-core
# (npm, pinned) for the accessibility check, into .cache/ (not committed); and
# the PostgreSQL server binaries (Debian package `postgresql`: initdb, pg_ctl,
# the `postgres` user) for the throwaway clusters of tests/pg_fixtures.py; and
# Caddy (Debian package `caddy`), the reverse proxy of tests/e2e/test_proxy_caddy.py;
# and Dovecot (Debian packages `dovecot-imapd`, `dovecot-lmtpd`), the IMAP mailboxes
# and the LMTP delivery of the e-mail tests (tests/fakes/dovecot.py); and tmux
# (Debian package `tmux`), the real terminal of the interactive agent tests
# (tests/bridge/tmux.py); and systemd (Debian package `systemd`), whose
# `systemd-analyze verify` checks the units of tests/cli/test_install_service.py;
# and bubblewrap (Debian package `bubblewrap`), the
# sandbox of bridge turns (docs/sandbox.md, tests/bridge/test_sandbox_e2e.py).
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

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing postgresql (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    # The package starts a system cluster; the tests run their own, so stop it.
    if command -v pg_lsclusters >/dev/null; then
      pg_lsclusters -h | while read -r ver name _; do
        pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true
      done
    fi
  fi
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null ||
    { echo "postgresql missing: apt-get install postgresql" >&2; missing=1; }
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  # initdb refuses to run as root; tests run the server as `postgres` (runuser).
  echo "user postgres missing (initdb cannot run as root): apt-get install postgresql" >&2
  missing=1
fi

if ! command -v caddy >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing caddy (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null
    # The package enables a system service on :80; the tests run their own.
    if command -v systemctl >/dev/null && systemctl is-active --quiet caddy 2>/dev/null; then
      systemctl stop caddy || true
    fi
  fi
  command -v caddy >/dev/null || { echo "caddy missing: apt-get install caddy" >&2; missing=1; }
fi

if ! command -v dovecot >/dev/null || [ ! -x /usr/lib/dovecot/imap ] || [ ! -x /usr/lib/dovecot/lmtp ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing dovecot-imapd and dovecot-lmtpd (Debian packages)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dovecot-imapd dovecot-lmtpd >/dev/null
    # The package enables a system service on :143/:993; the tests run their own
    # (with a configuration of their own, on free loopback ports).
    if command -v systemctl >/dev/null; then
      systemctl stop dovecot.service dovecot.socket 2>/dev/null || true
      systemctl disable dovecot.service dovecot.socket 2>/dev/null || true
    fi
    # Without systemd (a container) the package's init script started it.
    if [ -x /etc/init.d/dovecot ]; then /etc/init.d/dovecot stop >/dev/null 2>&1 || true; fi
  fi
  { command -v dovecot >/dev/null && [ -x /usr/lib/dovecot/imap ] && [ -x /usr/lib/dovecot/lmtp ]; } ||
    { echo "dovecot missing: apt-get install dovecot-imapd dovecot-lmtpd" >&2; missing=1; }
fi

if ! command -v tmux >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing tmux (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
  fi
  command -v tmux >/dev/null || { echo "tmux missing: apt-get install tmux" >&2; missing=1; }
fi

if ! command -v systemd-analyze >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing systemd (Debian package: systemd-analyze verify)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
  fi
  command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing: apt-get install systemd" >&2; missing=1; }
fi

if ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing bubblewrap (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  fi
  command -v bwrap >/dev/null || { echo "bubblewrap missing: apt-get install bubblewrap" >&2; missing=1; }
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
  echo "CI=true: test dependencies missing (browser, PostgreSQL, Caddy, Dovecot, tmux, systemd or bubblewrap)" >&2
  exit 1
fi
exit 0
