#!/bin/sh
# install.sh BINARY: `make install` (PREFIX, DESTDIR) into a temporary folder. Prints
# "ok N - ..." or "not ok N - ..."; a check whose tool is missing here prints "ok N - # SKIP ...".
set -u
bin=$1
case $bin in /*) ;; *) bin="$(pwd)/${bin#./}" ;; esac
binarg=${1#./} # as make names it
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - # SKIP $1"; }
t() { # t DESCRIPTION COMMAND...
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$d"; else nok "$d"; fi
}
version=$("$bin" --version)
# the make calls below inherit this make's variables (VARIANT, BIN, ...) through MAKEFLAGS, so
# they install the binary under test and rebuild nothing
mk() { make --no-print-directory BIN="$binarg" "$@" > "$tmp/make.log" 2>&1 || { cat "$tmp/make.log" >&2; return 1; }; }

# ---- make install ----
if mk install DESTDIR="$tmp/root" PREFIX=/usr; then ok "make install DESTDIR=... PREFIX=/usr"; else nok "make install DESTDIR=... PREFIX=/usr"; fi
t "the binary is installed executable in PREFIX/bin" test -x "$tmp/root/usr/bin/memreport"
t "the man page is installed in PREFIX/share/man/man1" test -f "$tmp/root/usr/share/man/man1/memreport.1"
[ "$("$tmp/root/usr/bin/memreport" --version 2>&1)" = "$version" ] \
	&& ok "the installed binary runs: --version" || nok "the installed binary runs: --version"
"$tmp/root/usr/bin/memreport" samples/oom_fragmentation.pickle --format json -o - 2>/dev/null \
	| grep -q '"cause": "fragmentation"' \
	&& ok "the installed binary reports without the source tree (templates built in)" \
	|| nok "the installed binary reports without the source tree (templates built in)"
if command -v man >/dev/null 2>&1; then
	MANPAGER=cat MANWIDTH=80 man -l "$tmp/root/usr/share/man/man1/memreport.1" 2>/dev/null | grep -q 'memreport batch' \
		&& ok "man renders the installed page" || nok "man renders the installed page"
else
	skip "man renders the installed page: no man here"
fi
mk install DESTDIR="$tmp/root2" && [ -x "$tmp/root2/usr/local/bin/memreport" ] \
	&& [ -f "$tmp/root2/usr/local/share/man/man1/memreport.1" ] \
	&& ok "PREFIX defaults to /usr/local" || nok "PREFIX defaults to /usr/local"
