#!/usr/bin/env bash
# Builds the Debian package of aai-gateway with Debian's own dpkg-deb: the binary, its manual
# page, shell completions, the README and the manual (docs/manual/). Usage:
#   scripts/deb.sh [BINARY] [OUT_DIR]   (default: target/release/aai-gateway, target/debian)
# Build the binary first (`cargo build --release -p aai-gateway`).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-target/release/aai-gateway}
out=${2:-target/debian}
[ -x "$binary" ] || { echo "deb.sh: $binary is missing: run cargo build --release -p aai-gateway" >&2; exit 2; }
version=$("$binary" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
chmod 755 "$root"

install -Dm755 "$binary" "$root/usr/bin/aai-gateway"
strip --strip-unneeded "$root/usr/bin/aai-gateway"
mkdir -p "$root/usr/share/man/man1"
"$binary" man | gzip -9n > "$root/usr/share/man/man1/aai-gateway.1.gz"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
"$binary" completions bash > "$root/usr/share/bash-completion/completions/aai-gateway"
"$binary" completions zsh > "$root/usr/share/zsh/vendor-completions/_aai-gateway"
"$binary" completions fish > "$root/usr/share/fish/vendor_completions.d/aai-gateway.fish"
install -Dm644 README.md "$root/usr/share/doc/aai-gateway/README.md"
for page in docs/manual/*.md; do
  install -Dm644 "$page" "$root/usr/share/doc/aai-gateway/$page"
done
cat > "$root/usr/share/doc/aai-gateway/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: aai-gateway
Source: https://github.com/aai-gateway/aai-gateway

Files: *
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT

size=$(du -sk "$root/usr" | cut -f1)
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: aai-gateway
Version: $version
Section: utils
Priority: optional
Architecture: $arch
Installed-Size: $size
Depends: libc6, libgcc-s1
Recommends: dbus, tesseract-ocr, chromium
Maintainer: aai-gateway maintainers <maintainers@aai-gateway.invalid>
Homepage: https://github.com/aai-gateway/aai-gateway
Description: one MCP server for using your applications
 aai-gateway lets AI agents (any MCP client) use the user's applications
 through their own automation interfaces (D-Bus, AppleScript, COM, REST),
 with an approval policy, an audit log and an emergency stop.
CONTROL

mkdir -p "$out"
deb="$out/aai-gateway_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group -Zgzip "$root" "$deb" >/dev/null
echo "$deb"
