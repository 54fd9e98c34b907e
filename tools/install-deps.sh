#!/bin/sh
# Install everything Sky's build, tests, cross builds and demo need.
# Idempotent, apt only: a second run installs nothing and exits 0.
# Usage: tools/install-deps.sh [--native-only]
set -eu

native="build-essential make pkg-config libopenblas-dev libmbedtls-dev libpaho-mqtt-dev
libcjson-dev mosquitto mosquitto-clients gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
clang libclang-rt-14-dev openssl iproute2 libmicrohttpd-dev prometheus curl libsystemd-dev
systemd dpkg-dev lintian python3 libutf8proc-dev fortunes libcsv-dev"
cross="libopenblas-dev:arm64 libmbedtls-dev:arm64 libpaho-mqtt-dev:arm64 libcjson-dev:arm64
libmicrohttpd-dev:arm64 libsystemd-dev:arm64 libutf8proc-dev:arm64 libcsv-dev:arm64"

want_native=1
want_cross=1
[ "${1:-}" = "--native-only" ] && want_cross=0

missing() {
	out=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
			|| out="$out $p"
	done
	echo "$out"
}

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

need=""
[ $want_native -eq 1 ] && need="$(missing $native)"
if [ $want_cross -eq 1 ]; then
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		echo "install-deps: adding the arm64 architecture for cross builds"
		$SUDO dpkg --add-architecture arm64
		updated=0
	fi
	need="$need$(missing $cross)"
fi
need="$(echo $need)"
if [ -z "$need" ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
echo "install-deps: installing $need"
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
echo "install-deps: done"
