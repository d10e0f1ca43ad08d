#!/bin/sh
# cli_shard.sh BINARY: `memreport batch --shard I/N` and `memreport merge` (issue 19), on the
# project's own tests/corpus runs (no ../shared needed). Prints "ok N - ..." / "not ok N - ...".
set -u
bin=$1
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
src=$(pwd)
n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { if [ "$1" -eq 0 ]; then ok "$2"; else nok "$2${3:+ ($3)}"; fi; }

# runs/: run folders, a run with two ranks, a zip of two runs, a single file
mkdir -p "$tmp/bin" "$tmp/runs/ranked/rank0" "$tmp/runs/ranked/rank1"
ln -s "$bin" "$tmp/bin/memreport"
for r in train_leak ddp_one_rank hf_llama_oom infer_mode_oom compile_oom; do
	cp -r "tests/corpus/$r" "$tmp/runs/$r"
done
cp tests/corpus/lightning_healthy/snapshot.pickle.xz "$tmp/runs/ranked/rank0/snapshot.pickle.xz"
cp tests/corpus/lbfgs_closure/snapshot.pickle.xz "$tmp/runs/ranked/rank1/snapshot.pickle.xz"
(cd tests/corpus && zip -qr "$tmp/runs/two_runs.zip" retries_survived ckpt_on_oom)
cp samples/oom_fragmentation.pickle "$tmp/runs/single.pickle"
cd "$tmp" || exit 1
export PATH="$tmp/bin:$PATH"

memreport batch runs/ -o full -j 2 -q 2>err
check $? "the unsharded batch exits 0" "$(head -c 300 err)"
runs=$(grep -c '^{"name"' full/index.json)

# same: the files of two batch folders are byte-identical (the shard indexes aside)
same() {
	a=$(cd "$1" && ls | grep -v '^index\.shard-')
	b=$(cd "$2" && ls | grep -v '^index\.shard-')
	[ "$a" = "$b" ] || { echo "files differ: $(echo $a) / $(echo $b)"; return 1; }
	for f in $a; do cmp -s "$1/$f" "$2/$f" || { echo "$f differs"; return 1; }; done
}

# the README's xargs recipe, word for word
recipe=$(grep '^seq 0 3 | xargs -P 4' "$src/README.md")
[ -n "$recipe" ] && sh -c "$recipe" 2>err
check $? "the README's xargs recipe runs four shards in parallel and merges them" "$(head -c 300 err)"
d=$(same full out)
check $? "4 shards merged: index.html, index.json and all $runs reports equal the unsharded batch" "$d"
[ "$(ls out/index.shard-*-of-4.json | wc -l)" -eq 4 ] && [ "$runs" -ge 9 ]
check $? "four shard indexes for $runs runs"
for i in 0 1 2 3; do grep -o '"slug": "[^"]*"' "out/index.shard-$i-of-4.json"; done | sort | uniq -d >dups
[ ! -s dups ] && [ "$(for i in 0 1 2 3; do grep -o '"slug": "[^"]*"' "out/index.shard-$i-of-4.json"; done | wc -l)" -eq "$runs" ]
check $? "every run is in exactly one shard index" "$(cat dups)"
[ "$(grep -l '"group": "runs/ranked"' out/index.shard-*.json | wc -l)" -eq 1 ] &&
	[ "$(grep -o '"group": "runs/ranked"' out/index.shard-*.json | wc -l)" -eq 2 ]
check $? "the two ranks of one run are in one shard"

# a shard writes no index.html/index.json, and re-running it changes nothing
mkdir one && memreport batch runs/ -o one --shard 1/4 -q && [ ! -e one/index.html ] && [ ! -e one/index.json ] &&
	cmp -s one/index.shard-1-of-4.json out/index.shard-1-of-4.json
check $? "a shard writes only its reports and index.shard-1-of-4.json, the same every time"

# other ways to cut: 1, 3 and 7 shards give the same index
for k in 1 3 7; do
	i=0
	while [ $i -lt $k ]; do echo $i; i=$((i + 1)); done |
		xargs -P 4 -I{} memreport batch runs/ -o "k$k" --shard "{}/$k" -j 1 -q && memreport merge "k$k" -q
	d=$(same full "k$k")
	check $? "$k shards merge to the unsharded output" "$d"
done

# the Slurm and Kubernetes recipes' lines, with the scheduler's variables set by hand (their
# shared paths made local, 64 shards made 4)
localize() { sed 's/^ *//; s/^- //; s|/shared/runs/|runs/|g; s|/shared/reports|out|g; s|/shared/memreport-cache|rcache|g; s|/64"|/4"|'; }
slurm=$(grep 'memreport batch .*--shard "\$SLURM_ARRAY_TASK_ID/64"' "$src/README.md" | localize)
k8s=$(grep 'memreport batch .*--shard "\$JOB_COMPLETION_INDEX/64"' "$src/README.md" | localize)
merge=$(grep '^sbatch --dependency=afterok' "$src/README.md" | sed "s/.*--wrap '//; s/'$//" | localize)
rm -rf out && bad=0
for i in 0 1 2 3; do
	SLURM_ARRAY_TASK_ID=$i SLURM_CPUS_PER_TASK=1 sh -c "$slurm" 2>err || bad=1
done
[ -n "$slurm" ] && [ -n "$merge" ] && [ $bad -eq 0 ] && sh -c "$merge" 2>/dev/null && d=$(same full out)
check $? "the Slurm array recipe's batch line, run for tasks 0-3, then its merge job's line" "$d$(head -c 200 err)"
rm -rf out && bad=0
for i in 3 1 0 2; do
	JOB_COMPLETION_INDEX=$i sh -c "$k8s" 2>err || bad=1
done
[ -n "$k8s" ] && [ $bad -eq 0 ] && memreport merge out -q && d=$(same full out)
check $? "the Kubernetes Indexed Job recipe's batch line, for indexes 3 1 0 2, then merge" "$d$(head -c 200 err)"
if command -v parallel >/dev/null 2>&1; then
	rm -rf out
	sh -c "$(grep '^parallel memreport batch' "$src/README.md")" && d=$(same full out)
	check $? "the README's GNU parallel recipe" "$d"
fi

# two shards at the same time against one shared cache, then again from the cache
(memreport batch runs/ -o c1 --shard 0/2 --cache cache -j 1 -q &
	memreport batch runs/ -o c1 --shard 1/2 --cache cache -j 1 -q & wait) &&
	memreport merge c1 -q && d=$(same full c1)
check $? "two shards running at once on one new --cache merge to the unsharded output" "$d"
entries=$(ls cache | grep -c '\.mrc$')
[ "$entries" -eq "$runs" ] && [ -z "$(ls cache | grep -v '\.mrc$')" ]
check $? "the shared cache holds one entry per run and no temporary file ($entries for $runs)"
(memreport batch runs/ -o c2 --shard 0/2 --cache cache -j 1 2>e0 &
	memreport batch runs/ -o c2 --shard 1/2 --cache cache -j 1 2>e1 & wait)
hits=$(cat e0 e1 | sed -n 's/.*(\([0-9]*\) from the cache).*/\1/p' | awk '{ s += $1 } END { print s }')
memreport merge c2 -q && d=$(same full c2) && [ "$hits" = "$runs" ]
check $? "the second time both shards read every run from the cache ($hits of $runs)" "$d"
# concurrent writers of the same entries: two whole batches at once on a fresh cache
(memreport batch runs/ -o w1 --cache wc -j 1 -q & memreport batch runs/ -o w2 --cache wc -j 1 -q & wait)
d=$(same full w1) && d=$(same full w2) && memreport batch runs/ -o w3 --cache wc 2>&1 | grep -q "($runs from the cache)" && [ -z "$(ls wc | grep -v '\.mrc$')" ]
check $? "two batches writing the same cache entries at once: both right, every entry valid" "$d"
# a cut entry is a miss, rewritten, never trusted
e=$(ls wc/*.mrc | head -n 1)
size=$(wc -c <"$e")
head -c 100 "$e" >"$e.cut" && mv "$e.cut" "$e"
memreport batch runs/ -o w4 --cache wc 2>&1 | grep -q "($((runs - 1)) from the cache)" && d=$(same full w4) &&
	[ "$(wc -c <"$e")" -eq "$size" ]
check $? "a cache entry cut short is rebuilt and rewritten, the output unchanged" "$d"

# merge refuses what is not one whole batch: exit 2, one line naming it, no index written
refuse() { # refuse NAME DIR PATTERN: merge DIR exits 2 with one line matching PATTERN
	rm -f "$2/index.html" "$2/index.json"
	memreport merge "$2" >/dev/null 2>err
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q -- "$3" err && [ ! -e "$2/index.html" ] && [ ! -e "$2/index.json" ]
	check $? "$1" "exit $rc: $(head -c 300 err)"
}
fresh() { rm -rf "$1" && cp -r k3 "$1"; }
fresh m && rm m/index.shard-2-of-3.json
refuse "a missing shard: exit 2 naming it" m "missing shard 2 of 3"
fresh m && rm m/index.shard-0-of-3.json m/index.shard-2-of-3.json
refuse "two missing shards: exit 2 naming both" m "missing shards 0, 2 of 3"
fresh m && cp m/index.shard-1-of-3.json m/index.shard-1-of-3.again.json
refuse "a duplicated shard: exit 2 naming both files" m "shard 1 of 3 is there twice"
fresh m && memreport batch runs/ -o m --shard 0/2 -q
refuse "shards of another N in the folder: exit 2" m "disagree on N"
fresh m && rm m/index.shard-1-of-3.json && memreport batch runs/ -o m --shard 1/3 --redact-paths -q
refuse "a shard run with other options: exit 2" m "disagree on the inputs and options"
# a shard index with rows, to tamper with
busy=$(basename "$(grep -l '"row": {' k3/index.shard-*.json | head -n 1)")
bi=$(echo "$busy" | sed 's/index.shard-\([0-9]*\)-.*/\1/')
fresh m && head -c 2000 "k3/$busy" >"m/$busy"
refuse "a shard index cut short: exit 2, the file and the byte" m "$busy: byte 2000"
fresh m && sed 's/"peak_reserved": \([0-9]\)/"peak_reserved": -\1/' "k3/$busy" >"m/$busy"
refuse "a tampered number: exit 2" m "$busy: byte [0-9]*: expected a non-negative integer"
fresh m && sed 's/"schema": "memreport\/1"/"schema": memreport\/1"/' "k3/$busy" >"m/$busy"
refuse "a broken embedded report document: exit 2" m "$busy: byte"
fresh m && sed "s/\"shard\": $bi,/\"shard\": $(((bi + 1) % 3)),/" "k3/$busy" >"m/$busy"
refuse "a shard index whose runs belong to another shard: exit 2" m "$busy: byte [0-9]*: expected a run whose key belongs to this shard"
fresh m && printf '\0\377garbage' >m/index.shard-0-of-3.json
refuse "a binary file in a shard index's place: exit 2" m "index.shard-0-of-3.json: byte 0"
fresh m && rm "m/$(grep -o '"slug": "[^"]*"' "k3/$busy" | head -n 1 | cut -d'"' -f4).html"
refuse "a report missing from the folder: exit 2" m "is missing: run its shard again"
mkdir empty
refuse "a folder without shard indexes: exit 2" empty "no shard index"
memreport merge nowhere 2>err
check $(($? != 2)) "merge of a folder that does not exist exits 2"
memreport merge 2>err
check $(($? != 2)) "merge without a folder exits 2"

# --shard takes I/N with 0 <= I < N <= 65536, and nothing else
bad=""
for v in 4/4 0/0 5/4 x/4 -1/4 " 1/4" 1/4x 1/ /4 1 0/65537 99999999999999999999/4 1/+4; do
	memreport batch runs/ -o never --shard "$v" 2>err
	rc=$?
	[ $rc -eq 2 ] && grep -q -- "--shard needs I/N" err || bad="$bad [$v: exit $rc]"
done
[ -z "$bad" ] && [ ! -e never ]
check $? "--shard refuses bad values with exit 2 before writing anything" "$bad"
memreport batch runs/ -o big --shard 65535/65536 -q
check $? "--shard 65535/65536 is accepted"

