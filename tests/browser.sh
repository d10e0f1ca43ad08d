#!/bin/sh
# browser.sh BINARY: opens HTML reports of corpus samples in headless Chromium with the network
# disabled, and checks what a person would see: the verdict is in the rendered DOM, the
# segment-map images decoded (naturalWidth > 0), the timeline SVG is laid out, the page's script
# ran under its Content-Security-Policy, and a screenshot is not blank. The batch index and the
# diff page have the same shell and policy, and the index sorts.
# Prints "ok N - ..." / "not ok N - ..." lines; skips when /usr/bin/chromium is absent.
set -u
bin=$1
. tests/samples.sh
chromium=${CHROMIUM:-/usr/bin/chromium}
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
if [ ! -x "$chromium" ]; then
	echo "ok 1 - # SKIP chromium not installed"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_chromium OUTFILE ARGS...: headless, sandbox off (CI runs as root), no network at all.
run_chromium() {
	out=$1
	shift
	profile=$(mktemp -d "$tmp/profile.XXXXXX")
	timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--disable-extensions --disable-default-apps --mute-audio \
		--proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' \
		--host-resolver-rules='MAP * ~NOTFOUND' \
		--enable-logging=stderr --v=0 --user-data-dir="$profile" --virtual-time-budget=5000 "$@" >"$out" 2>"$out.err"
}

# A probe appended to a copy of the report: it reads what the browser actually rendered and
# writes it into the DOM, which --dump-dom then prints. Its hash joins the script hashes of the
# copy's CSP, so the page's own script and style still run under the policy as shipped, and the
# one launch also checks them (a page whose own script or style broke the policy is reported).
probe_js='
(function(){
  var imgs=[].slice.call(document.querySelectorAll("img.map"));
  var decoded=imgs.filter(function(i){return i.complete&&i.naturalWidth>0;}).length;
  var svg=document.querySelector("svg.timeline");
  /* timeline.js hides the static figure when it draws the interactive one */
  var fig=svg&&svg.closest("figure");if(fig)fig.hidden=false;
  var box=svg?svg.getBoundingClientRect():null;
  var v=document.getElementById("verdict");
  var toolbar=document.querySelector("#sites .toolbar");
  var css=getComputedStyle(document.body).backgroundColor;
  var p=document.createElement("pre");p.id="probe";
  p.textContent="RESULT: imgs="+imgs.length+" decoded="+decoded+
    " svg="+(box?Math.round(box.width)+"x"+Math.round(box.height):"none")+
    " verdict="+(v?v.textContent.length:0)+
    " bg="+css.replace(/ /g,"");
  document.body.appendChild(p);
})();
'
# with_probe HTML JS OUT: a copy of HTML with the script JS appended and allowed by its hash.
with_probe() {
	hash=$(printf '%s' "$2" | python3 -c 'import base64, hashlib, sys
print(base64.b64encode(hashlib.sha256(sys.stdin.buffer.read()).digest()).decode())')
	sed "s|script-src 'sha256-|script-src 'sha256-$hash' 'sha256-|" "$1" >"$3"
	printf '<script>%s</script>\n' "$2" >>"$3"
}

samples="oom_fragmentation gpt_varlen mlp_healthy no_history cuda_graph"
for s in $samples; do
	if ! snap=$(sample_snapshot "$s"); then
		ok "$s # SKIP not in build/corpus nor $samples_shared"
		continue
	fi
	html="$tmp/$s.html"
	if ! "$bin" "$snap" -q -o "$html" 2>"$tmp/err"; then
		nok "$s: report written ($(head -c 200 "$tmp/err"))"
		continue
	fi

	# 1. The page's own script runs under its CSP (it unhides the toolbar), and the verdict is
	#    in the rendered DOM. One launch of the probed copy gives the DOM of steps 1 and 2 and
	#    the screenshot of step 3.
	with_probe "$html" "$probe_js" "$tmp/$s.probe.html"
	run_chromium "$tmp/$s.dom" --dump-dom --hide-scrollbars --window-size=1280,2000 \
		--screenshot="$tmp/$s.png" "file://$tmp/$s.probe.html"
	if grep -q 'id="verdict"' "$tmp/$s.dom" && grep -q 'class="toolbar"' "$tmp/$s.dom" \
		&& ! grep -q 'class="toolbar" hidden' "$tmp/$s.dom"; then
		ok "$s: verdict rendered, page script ran under its CSP"
	else
		nok "$s: verdict rendered, page script ran under its CSP"
	fi
	if grep -q 'violates the following Content Security Policy' "$tmp/$s.dom.err"; then
		nok "$s: no CSP violations ($(grep 'violates' "$tmp/$s.dom.err" | head -c 200))"
	else
		ok "$s: no CSP violations"
	fi

	# 2. What the browser rendered: images decoded, SVG laid out, CSS applied.
	line=$(grep -o "RESULT: imgs=[0-9][^<]*" "$tmp/$s.dom" | head -n 1)
	imgs=$(echo "$line" | sed -n 's/.* imgs=\([0-9]*\).*/\1/p')
	decoded=$(echo "$line" | sed -n 's/.* decoded=\([0-9]*\).*/\1/p')
	svg=$(echo "$line" | sed -n 's/.* svg=\([^ ]*\).*/\1/p')
	verdict=$(echo "$line" | sed -n 's/.* verdict=\([0-9]*\).*/\1/p')
	bg=$(echo "$line" | sed -n 's/.* bg=\([^ ]*\).*/\1/p')
	if [ -n "$imgs" ] && [ "$imgs" -ge 1 ] && [ "$decoded" = "$imgs" ]; then
		ok "$s: all $imgs segment-map images decoded"
	else
		nok "$s: segment-map images decoded ($line)"
	fi
	if [ "${verdict:-0}" -gt 20 ]; then ok "$s: verdict has text"; else nok "$s: verdict has text ($line)"; fi
	if [ "$s" = no_history ]; then
		[ "$svg" = none ] && ok "$s: no timeline without a trace" || nok "$s: no timeline without a trace ($line)"
	else
		w=${svg%x*}
		if [ "$svg" != none ] && [ "${w:-0}" -gt 300 ]; then
			ok "$s: timeline SVG laid out ($svg)"
		else
			nok "$s: timeline SVG laid out ($line)"
		fi
	fi
	if [ "$bg" = "rgb(245,246,248)" ]; then ok "$s: stylesheet applied"; else nok "$s: stylesheet applied (bg=$bg)"; fi

	# 3. The screenshot of the page is not blank: many distinct colours.
	if [ -s "$tmp/$s.png" ] && [ "$(wc -c < "$tmp/$s.png")" -gt 30000 ]; then
		ok "$s: screenshot is not blank ($(wc -c < "$tmp/$s.png") bytes)"
	else
		nok "$s: screenshot is not blank"
	fi
	[ -n "${MEMREPORT_SCREENSHOTS:-}" ] && cp "$tmp/$s.png" "$MEMREPORT_SCREENSHOTS/" 2>/dev/null
done

# The check above can fail: a page whose style or script differs from what its CSP hashes
# allow is reported.
if [ -f "$tmp/mlp_healthy.html" ]; then
	sed 's/"use strict";/"use strict"; /' "$tmp/mlp_healthy.html" > "$tmp/tampered.html"
	run_chromium "$tmp/tampered.dom" --dump-dom "file://$tmp/tampered.html"
	if grep -q 'violates the following Content Security Policy' "$tmp/tampered.dom.err" \
		&& grep -q 'class="toolbar" hidden' "$tmp/tampered.dom"; then
		ok "a tampered script is blocked by the page's CSP (the check can fail)"
	else
		nok "a tampered script is blocked by the page's CSP (the check can fail)"
	fi
fi

# The hostile snapshot: no alert dialog, no script of its own ran.
hostile=tests/fixtures/html/hostile_snapshot.pickle
if [ -f "$hostile" ]; then
	"$bin" "$hostile" -q -o "$tmp/hostile.html" 2>/dev/null
	run_chromium "$tmp/hostile.dom" --dump-dom "file://$tmp/hostile.html"
	if [ -s "$tmp/hostile.dom" ] && ! grep -q '<script>alert\|<img src="x"\|<img src=x' "$tmp/hostile.dom" \
		&& [ "$(grep -c '<script' "$tmp/hostile.dom")" -eq 3 ] \
		&& [ "$(grep -c '<script type="application/json" id="memreport-data">' "$tmp/hostile.dom")" -eq 1 ]; then
		ok "hostile snapshot: nothing from it became an element"
	else
		nok "hostile snapshot: nothing from it became an element"
	fi
fi

# The batch index and the diff page share the report's shell and CSP: their own style and
# script by hash, nothing inline. The index's script runs under it (it makes the sortable
# headers focusable) and sorts: a probe clicks "Peak reserved" and reads the order of the rows.
# strict_page HTML DOM: the page's policy is the strict one, and Chromium reported no violation.
strict_page() {
	grep -q "style-src 'sha256-[^;]*; script-src \('sha256-\|'none'\)" "$1" && ! grep -q "unsafe-inline" "$1" &&
		! grep -q 'violates the following Content Security Policy' "$2.err"
}
runs=""
for s in mlp_healthy oom_capacity gpt_varlen oom_fragmentation; do
	d=$(sample_dir "$s") && runs="$runs $d"
done
if [ -n "$runs" ]; then
	# shellcheck disable=SC2086
	"$bin" batch $runs -o "$tmp/batch" -q 2>"$tmp/err"
	sort_js='
(function(){
  var th=document.querySelectorAll("th[data-k]")[3];th.click();
  var v=[].map.call(document.querySelectorAll("tbody tr"),function(r){return parseFloat(r.cells[3].getAttribute("data-v"));});
  var up=v.every(function(x,i){return i===0||v[i-1]<=x;});
  th.click();
  var w=[].map.call(document.querySelectorAll("tbody tr"),function(r){return parseFloat(r.cells[3].getAttribute("data-v"));});
  var down=w.every(function(x,i){return i===0||w[i-1]>=x;});
  var p=document.createElement("pre");p.textContent="SORTED: rows="+v.length+" up="+up+" down="+down;
  document.body.appendChild(p);
})();
'
	with_probe "$tmp/batch/index.html" "$sort_js" "$tmp/index.probe.html"
	run_chromium "$tmp/index.dom" --dump-dom "file://$tmp/index.probe.html"
	if [ "$(grep -o 'tabindex="0"' "$tmp/index.dom" | wc -l)" -ge 9 ] &&
		strict_page "$tmp/batch/index.html" "$tmp/index.dom"; then
		ok "batch index: its script ran under its CSP, no violations"
	else
		nok "batch index: its script ran under its CSP ($(grep 'violates' "$tmp/index.dom.err" | head -c 200))"
	fi
	line=$(grep -o "SORTED: rows=[0-9][^<]*" "$tmp/index.dom" | head -n 1)
	case $line in
	*"up=true down=true"*) ok "batch index: sorting by a column works both ways ($line)" ;;
	*) nok "batch index: sorting by a column works both ways ($line)" ;;
	esac
	set -- $runs
	if [ $# -ge 2 ]; then
		a=$(ls "$1"/*snapshot.pickle | head -n 1)
		b=$(ls "$2"/*snapshot.pickle | head -n 1)
		"$bin" diff "$a" "$b" -o "$tmp/diff.html" -q
		run_chromium "$tmp/diff.dom" --dump-dom "file://$tmp/diff.html"
		if grep -q '<h1>memreport diff</h1>' "$tmp/diff.dom" &&
			strict_page "$tmp/diff.html" "$tmp/diff.dom"; then
			ok "diff page: rendered under its CSP, no violations"
		else
			nok "diff page: rendered under its CSP ($(grep 'violates' "$tmp/diff.dom.err" | head -c 200))"
		fi
	fi
fi
