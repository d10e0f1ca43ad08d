#!/bin/sh
# mkdeb.sh BINARY MANPAGE VERSION DISTDIR: builds DISTDIR/memreport_VERSION_ARCH.deb with
# dpkg-deb (no debhelper): /usr/bin/memreport (stripped), the man page, the copyright file.
# Depends comes from dpkg-shlibdeps on the binary, so it names the runtime packages of the
# libraries it really links (libzip, msgpack-c, cmark, libpng, zlib, liblzma, libc). The package is
# reproducible: owners root, fixed modes, and every time stamp is SOURCE_DATE_EPOCH.
set -eu
bin=$1
man=$2
version=$3
dist=$4
: "${SOURCE_DATE_EPOCH:=1}"
: "${STRIP:=strip}"
: "${DEB_MAINTAINER:=memreport maintainers <memreport@invalid>}"
for tool in dpkg-deb dpkg-shlibdeps; do
	command -v $tool >/dev/null 2>&1 || {
		echo "make deb: $tool is missing; install it with: sudo apt-get install -y dpkg-dev" >&2
		exit 1
	}
done
[ -n "$version" ] || { echo "make deb: no version (MEMREPORT_VERSION not found in src/)" >&2; exit 1; }
arch=$(dpkg --print-architecture)
work=build/deb
root=$work/root
rm -rf "$work"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" "$root/usr/share/doc/memreport" \
	"$work/debian" "$dist"
"$STRIP" --strip-unneeded -o "$root/usr/bin/memreport" "$bin"
gzip -9n < "$man" > "$root/usr/share/man/man1/memreport.1.gz"
cp tools/deb/copyright "$root/usr/share/doc/memreport/copyright"

# dpkg-shlibdeps wants a debian/control; an empty one will do.
: > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O root/usr/bin/memreport 2>deps.err | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "make deb: dpkg-shlibdeps found no dependencies:" >&2; cat "$work/deps.err" >&2; exit 1; }
size=$(du -sk "$root/usr" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: memreport
Version: $version
Architecture: $arch
Maintainer: $DEB_MAINTAINER
Installed-Size: $size
Depends: $depends
Section: devel
Priority: optional
Description: explain PyTorch CUDA out-of-memory errors
 memreport reads what PyTorch's CUDA caching allocator recorded about a run
 (snapshot pickles from torch.cuda.memory._dump_snapshot(), memory_summary()
 tables, out-of-memory messages in a training log, memory_stats() dumps) and
 says why it ran out of memory, or how close it came, and what to change
 first. It writes one self-contained HTML page, or JSON, Markdown or text.
 Snapshots are decoded without running any code from them.
CONTROL

find "$root" -type d -exec chmod 755 {} +
find "$root" -type f -exec chmod 644 {} +
chmod 755 "$root/usr/bin/memreport"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
out="$dist/memreport_${version}_${arch}.deb"
rm -f "$dist"/memreport_*.deb
SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out"
