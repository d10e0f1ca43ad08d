#!/bin/sh
# cli_simulate.sh BINARY [FIRST]: `memreport simulate` on the command line. Prints "ok N - ..."
# or "not ok N - ..." like cli.sh (numbered from FIRST, default 1).
set -u
bin=$1
n=$((${2:-1} - 1))
. tests/samples.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { n=$((n + 1)); echo "ok $n - simulate: $1"; }
nok() { n=$((n + 1)); echo "not ok $n - simulate: $1"; }

# expect_exit DESCRIPTION STATUS NAME COMMAND...: exits STATUS, one stderr line naming NAME.
expect_exit() {
	d=$1
	want=$2
	name=$3
	shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	lines=$(wc -l < "$tmp/err")
	if [ "$rc" -eq "$want" ] && [ "$lines" -eq 1 ] && grep -qF -- "$name" "$tmp/err"; then
		ok "$d"
	else
		nok "$d (exit $rc, $lines stderr lines: $(head -c 300 "$tmp/err"))"
	fi
}

healthy=$(sample_snapshot mlp_healthy)
if [ -f "$healthy" ]; then
	"$bin" simulate "$healthy" --alloc-conf recorded > "$tmp/r.json" 2>"$tmp/err"
	[ $? -eq 0 ] && grep -q '"schema": "memreport-sim/1"' "$tmp/r.json" \
		&& ok "json to standard output" || nok "json to standard output ($(cat "$tmp/err"))"
	grep -q '"replay_matches_recording": true' "$tmp/r.json" && grep -q '"first_divergence": null' "$tmp/r.json" \
		&& ok "recorded settings reproduce mlp_healthy" || nok "recorded settings reproduce mlp_healthy"
	peak=$(sed -n 's/.*"reserved_bytes.all.peak": \([0-9]*\).*/\1/p' "$(sample_dir mlp_healthy)/memory_stats.json")
	[ -n "$peak" ] && grep -q "\"peak_reserved_bytes\": $peak," "$tmp/r.json" \
		&& ok "peak reserved equals memory_stats" || nok "peak reserved equals memory_stats ($peak)"
	for key in alloc_conf limit_bytes peak_reserved_bytes peak_allocated_bytes final_reserved_bytes \
		segments_allocated oom replay_matches_recording first_divergence; do
		grep -q "\"$key\": " "$tmp/r.json" || { nok "json key $key"; continue; }
	done
	grep -q '"limit_bytes": null' "$tmp/r.json" && grep -q '"oom": null' "$tmp/r.json" \
		&& ok "json keys of memreport-sim/1" || nok "json keys of memreport-sim/1"
	"$bin" simulate "$healthy" --alloc-conf expandable_segments:True --format text -o "$tmp/r.txt" \
		&& grep -q 'peak reserved' "$tmp/r.txt" && grep -q 'expandable_segments:True' "$tmp/r.txt" \
		&& ok "text report to a file" || nok "text report to a file"
	a=$("$bin" simulate "$healthy" --alloc-conf max_split_size_mb:64 | cksum)
	b=$("$bin" simulate "$healthy" --alloc-conf max_split_size_mb:64 | cksum)
	[ "$a" = "$b" ] && ok "output is deterministic" || nok "output is deterministic"
	expect_exit "unknown --alloc-conf key exits 2" 2 "$healthy" \
		"$bin" simulate "$healthy" --alloc-conf expandable_segments:True,bogus_key:1
	grep -q "Unrecognized key 'bogus_key'" "$tmp/err" && ok "says which key" || nok "says which key ($(cat "$tmp/err"))"
	expect_exit "bad boolean exits 2" 2 "$healthy" "$bin" simulate "$healthy" --alloc-conf expandable_segments:yes
	expect_exit "bad --limit exits 2" 2 "--limit" "$bin" simulate "$healthy" --alloc-conf recorded --limit lots
	"$bin" simulate "$healthy" --alloc-conf recorded -o /nonexistent-dir/r.json 2>/dev/null
	[ $? -eq 1 ] && ok "unwritable output exits 1" || nok "unwritable output exits 1"
else
	nok "mlp_healthy of tests/corpus is in build/corpus"
fi
expect_exit "missing snapshot exits 2" 2 "/nonexistent/x.pickle" \
	"$bin" simulate /nonexistent/x.pickle --alloc-conf expandable_segments:True
expect_exit "no snapshot given exits 2" 2 "simulate" "$bin" simulate --alloc-conf expandable_segments:True
nohist=$(sample_snapshot no_history)
expect_exit "snapshot without a trace exits 2" 2 "$nohist" \
	"$bin" simulate "$nohist" --alloc-conf expandable_segments:True

frag=$(sample_snapshot oom_fragmentation)
if [ -f "$frag" ]; then
	"$bin" simulate "$frag" --alloc-conf recorded --limit 4GiB > "$tmp/f.json"
	grep -q '"oom": {"event_index"' "$tmp/f.json" && grep -q '"replay_matches_recording": true' "$tmp/f.json" \
		&& ok "oom_fragmentation: the recorded settings OOM under 4 GiB" \
		|| nok "oom_fragmentation: the recorded settings OOM under 4 GiB"
	"$bin" simulate "$frag" --alloc-conf expandable_segments:True --limit 4GiB > "$tmp/e.json"
	grep -q '"oom": null' "$tmp/e.json" && grep -q '"limit_bytes": 4294967296' "$tmp/e.json" \
		&& ok "oom_fragmentation: no OOM with expandable segments" \
		|| nok "oom_fragmentation: no OOM with expandable segments"
	"$bin" simulate "$frag" --alloc-conf recorded > "$tmp/n.json"
	grep -q '"notes": \[.*--limit' "$tmp/n.json" \
		&& ok "without --limit, says the recorded OOM needs one" \
		|| nok "without --limit, says the recorded OOM needs one"
else
	nok "oom_fragmentation of tests/corpus is in build/corpus"
fi
