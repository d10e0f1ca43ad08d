#!/bin/sh
# tests/browser/run.sh BINARY: the interactive page in headless Chromium (puppeteer-core, see
# package.json), on pages the binary writes (./memreport SAMPLE -o PAGE) from corpus samples
# and the hostile fixture; then timeline.test.js on them. Prints "ok N - ..." / "not ok N -
# ..." lines; skips when Chromium, node or node_modules (npm ci) is absent.
set -u
bin=${1:-./memreport}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
here=$(dirname "$0")
if [ ! -x "$CHROMIUM" ]; then
	echo "ok 1 - # SKIP interactive page: chromium not installed"
	exit 0
fi
if ! command -v node >/dev/null 2>&1 || [ ! -d node_modules/puppeteer-core ]; then
	echo "ok 1 - # SKIP interactive page: node or node_modules absent (run npm ci)"
	exit 0
fi
. tests/samples.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
page() { # NAME INPUT...
	name=$1
	shift
	if ! "$bin" "$@" -q -o "$tmp/$name.html" 2>"$tmp/$name.err"; then
		echo "not ok 1 - page $name ($(head -c 300 "$tmp/$name.err"))"
		exit 1
	fi
}
page oom_capacity "$(sample_snapshot oom_capacity)"
page no_history "$(sample_snapshot no_history)"
page hostile tests/fixtures/html/hostile_snapshot.pickle
# One byte more in the inline timeline.js: its hash no longer matches the page's CSP.
sed 's/var PALETTE = \[/var PALETTE =  [/' "$tmp/oom_capacity.html" > "$tmp/tampered.html"
node "$here/timeline.test.js" "$tmp"
