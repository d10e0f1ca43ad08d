#!/bin/sh
# install.sh BINARY: `make install` (PREFIX, DESTDIR), `make deb` and `make wheel`, each into a
# temporary folder. Prints "ok N - ..." or "not ok N - ..."; a check whose tool is missing here
# prints "ok N - # SKIP ...".
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
	MANPAGER=cat MANWIDTH=80 man -l "$tmp/root/usr/share/man/man1/memreport.1" 2>/dev/null | grep -Eq 'memreport +batch' \
		&& ok "man renders the installed page" || nok "man renders the installed page"
else
	skip "man renders the installed page: no man here"
fi
mk install DESTDIR="$tmp/root2" && [ -x "$tmp/root2/usr/local/bin/memreport" ] \
	&& [ -f "$tmp/root2/usr/local/share/man/man1/memreport.1" ] \
	&& ok "PREFIX defaults to /usr/local" || nok "PREFIX defaults to /usr/local"

# ---- make deb ----
if ! command -v dpkg-deb >/dev/null 2>&1 || ! command -v dpkg-shlibdeps >/dev/null 2>&1; then
	skip "make deb: no dpkg-deb / dpkg-shlibdeps (dpkg-dev) here"
elif mk deb DIST="$tmp/dist"; then
	deb=$(ls "$tmp"/dist/memreport_*.deb 2>/dev/null)
	v=${version#memreport }
	arch=$(dpkg --print-architecture)
	[ "$deb" = "$tmp/dist/memreport_${v}_$arch.deb" ] && ok "make deb writes DIST/memreport_VERSION_ARCH.deb" \
		|| nok "make deb writes DIST/memreport_VERSION_ARCH.deb ($deb)"
	[ "$(dpkg-deb -f "$deb" Package Version Architecture | tr '\n' ' ')" = "Package: memreport Version: $v Architecture: $arch " ] \
		&& ok "its control names package, version and architecture" || nok "its control names package, version and architecture"
	dpkg-deb -c "$deb" | awk '{print $1, $2, $6}' > "$tmp/contents"
	grep -qx -- '-rwxr-xr-x root/root ./usr/bin/memreport' "$tmp/contents" \
		&& grep -qx -- '-rw-r--r-- root/root ./usr/share/man/man1/memreport.1.gz' "$tmp/contents" \
		&& grep -qx -- '-rw-r--r-- root/root ./usr/share/doc/memreport/copyright' "$tmp/contents" \
		&& ok "it holds /usr/bin/memreport, the man page and the copyright file, owned by root" \
		|| nok "it holds /usr/bin/memreport, the man page and the copyright file, owned by root ($(cat "$tmp/contents"))"
	# Depends names the package of every library the binary links, and these six
	depends=$(dpkg-deb -f "$deb" Depends)
	missing=""
	for lib in $(readelf -d "$bin" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'); do
		path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
		pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -n "$pkg" ] || pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
		case ", $depends" in *", $pkg "* | *", $pkg,"*) ;; *) missing="$missing $lib($pkg)" ;; esac
	done
	for pkg in libzip4 libmsgpackc2 libcmark0.30.2 libpng16-16 liblzma5 libc6; do
		case ", $depends" in *", $pkg "* | *", $pkg,"*) ;; *) missing="$missing $pkg" ;; esac
	done
	[ -z "$missing" ] && ok "Depends names the runtime package of every linked library ($depends)" \
		|| nok "Depends names the runtime package of every linked library (missing:$missing; $depends)"
	mkdir "$tmp/x" && dpkg-deb -x "$deb" "$tmp/x" && [ "$("$tmp/x/usr/bin/memreport" --version)" = "$version" ] \
		&& ok "the packaged binary runs" || nok "the packaged binary runs"
	sum=$(sha256sum < "$deb")
	mk deb DIST="$tmp/dist" && [ "$(sha256sum < "$deb")" = "$sum" ] \
		&& ok "make deb is reproducible (same bytes twice)" || nok "make deb is reproducible (same bytes twice)"
else
	nok "make deb"
fi

# ---- make wheel ----
if ! python3 -c 'import setuptools, wheel' >/dev/null 2>&1 && ! /usr/bin/python3 -c 'import setuptools, wheel' >/dev/null 2>&1; then
	skip "make wheel: no python3 with setuptools and wheel here"
elif mk wheel DIST="$tmp/wdist"; then
	whl=$(ls "$tmp"/wdist/memreport-*.whl 2>/dev/null)
	strip --strip-unneeded -o "$tmp/stripped" "$bin"
	python3 - "$whl" "${version#memreport }" "$tmp/stripped" > "$tmp/wheel.txt" <<'EOF'
import os, stat, sys, sysconfig, zipfile
whl, version, stripped = sys.argv[1:]
def ok(cond, desc):
    print(1 if cond else 0, desc)
plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
ok(os.path.basename(whl) == "memreport-%s-py3-none-%s.whl" % (version, plat),
   "make wheel writes DIST/memreport-VERSION-py3-none-%s.whl (%s)" % (plat, os.path.basename(whl)))
z = zipfile.ZipFile(whl)
names = z.namelist()
data = "memreport-%s.data/scripts/memreport" % version
ok(data in names and stat.S_IMODE(z.getinfo(data).external_attr >> 16) & 0o111 == 0o111,
   "it carries the binary as an executable script (%s)" % data)
ok(data in names and z.read(data) == open(stripped, "rb").read(), "the binary in it is the one built, stripped")
info = z.read("memreport-%s.dist-info/WHEEL" % version).decode()
ok("Root-Is-Purelib: false" in info, "it is a platform wheel, not a pure one")
ok({"memreport/__init__.py", "memreport/__main__.py", "memreport/capture/__init__.py",
    "memreport/capture/__main__.py"} <= set(names), "it carries memreport and memreport.capture")
EOF
	[ -s "$tmp/wheel.txt" ] || nok "the wheel could not be read"
	while read -r status desc; do
		if [ "$status" = 1 ]; then ok "$desc"; else nok "$desc"; fi
	done < "$tmp/wheel.txt"
else
	nok "make wheel"
fi
