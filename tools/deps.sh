#!/bin/sh
# deps.sh check|install: the Debian 12 packages memreport needs to build and test.
# `check` prints the exact apt-get line and fails when something is missing;
# `install` installs what is missing when run as root, else does what `check` does.
set -u
PKGS="build-essential pkg-config libzip-dev libmsgpack-dev libcmark-dev libpng-dev zlib1g-dev liblzma-dev libcmocka-dev"
missing=""
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
command -v cc >/dev/null 2>&1 || missing="$missing build-essential"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
have_pc libzip || missing="$missing libzip-dev"
have_pc msgpack || have_pc msgpack-c || missing="$missing libmsgpack-dev"
have_pc libcmark || missing="$missing libcmark-dev"
have_pc libpng || missing="$missing libpng-dev"
have_pc zlib || missing="$missing zlib1g-dev"
have_pc liblzma || missing="$missing liblzma-dev"
have_pc cmocka || missing="$missing libcmocka-dev"
[ -z "$missing" ] && exit 0
if [ "${1:-check}" = install ] && [ "$(id -u)" = 0 ]; then
	echo "memreport: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq $missing >/dev/null && exit 0
	echo "memreport: apt-get failed" >&2
	exit 1
fi
echo "memreport: missing build dependencies. Install them with:" >&2
echo "  sudo apt-get install -y$missing" >&2
exit 1
