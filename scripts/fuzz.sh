#!/usr/bin/env bash
# Runs the module's fuzz targets one after another, each for FUZZTIME, and
# prints a table: target, execs, duration, execs/s, new interesting inputs,
# result. Stops at the first failure and prints the path of the failing
# input, which `go test` keeps under <pkg>/testdata/fuzz/FuzzX/ (commit it
# with the fix: plain `go test` replays it).
#
#   FUZZTIME=5m     how long each target runs (a duration, or Nx for N execs)
#   FUZZ=FuzzReader run only the targets of that name (or pkg/FuzzX, e.g.
#                   ./api/lineproto/FuzzDecode: two packages have a FuzzDecode)
#   PARALLEL=1      fuzzing workers (go test -parallel); default GOMAXPROCS
#   MINIMIZETIME=   how long the fuzzer minimises a new input (default 2s;
#                   the server targets find many, and Go's default 60s each
#                   leaves them little time to fuzz)
#   SEEDS=1         after each target, copy the fuzzer's corpus from the
#                   build cache to <pkg>/testdata/fuzz/FuzzX/ (the smallest
#                   inputs first, at most SEEDMAX files and SEEDBYTES bytes)
#
# Usage: scripts/fuzz.sh, or make fuzz with the same settings
# (make fuzz FUZZTIME=1m FUZZ=FuzzFind PARALLEL=1).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5m}
FUZZ=${FUZZ:-}
PARALLEL=${PARALLEL:-}
MINIMIZETIME=${MINIMIZETIME:-2s}
SEEDS=${SEEDS:-}
SEEDMAX=${SEEDMAX:-50}
SEEDBYTES=${SEEDBYTES:-204800}
LOGDIR=${LOGDIR:-$(mktemp -d -t hourglass-fuzz.XXXXXX)}

module=$($GO list -m)
cache=$($GO env GOCACHE)/fuzz

# Every fuzz target as ./pkg/FuzzX, sorted.
targets=$(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . |
	sed -E 's|^(.*)/[^/]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*|\1/\2|' | sort -u)
if [ -n "$FUZZ" ]; then
	targets=$(printf '%s\n' $targets | awk -v f="$FUZZ" '{ n = $0; sub(/.*\//, "", n); if (n == f || $0 == f || "./" $0 == f) print }')
fi
if [ -z "$targets" ]; then
	echo "fuzz: no fuzz target named $FUZZ" >&2
	exit 2
fi

# keep copies the cache's corpus of one target into its testdata.
keep() {
	local pkg=$1 name=$2 src dst n=0 bytes=0 size f
	src="$cache/$module${pkg#.}/$name"
	dst="$pkg/testdata/fuzz/$name"
	[ -d "$src" ] || return 0
	mkdir -p "$dst"
	# The caps hold for what dst then holds, kept inputs included.
	n=$(find "$dst" -type f | wc -l)
	bytes=$(find "$dst" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	while read -r size f; do
		[ -e "$dst/$(basename "$f")" ] && continue
		[ $n -lt "$SEEDMAX" ] && [ $((bytes + size)) -le "$SEEDBYTES" ] || break
		cp "$f" "$dst/"
		n=$((n + 1))
		bytes=$((bytes + size))
	done < <(find "$src" -type f -printf '%s %p\n' | sort -n)
	echo "fuzz: $dst holds $n inputs ($bytes bytes)"
}

row() { printf '%-40s %12s %9s %9s %12s  %s\n' "$@"; }
table=$(row target execs duration execs/s interesting result)
status=0
for t in $targets; do
	pkg=${t%/*}
	name=${t##*/}
	log="$LOGDIR/$(echo "${pkg#./}" | tr / _)_$name.log"
	args=(test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$MINIMIZETIME")
	[ -n "$PARALLEL" ] && args+=(-parallel "$PARALLEL")
	echo "fuzz: $GO ${args[*]} $pkg (log: $log)"
	if $GO "${args[@]}" "$pkg" >"$log" 2>&1; then result=ok; else result=FAIL; fi
	# The last progress line: "fuzz: elapsed: 1m2s, execs: 12345 (205/sec), new interesting: 3 (total: 80)".
	last=$(grep -E '^fuzz: elapsed: [0-9hms]+, execs: ' "$log" | tail -1 || true)
	secs=$(sed -E 's/^fuzz: elapsed: ([0-9hms]+),.*/\1/' <<<"$last" | awk '{ s = 0
		if (match($0, /[0-9]+h/)) s += substr($0, RSTART, RLENGTH - 1) * 3600
		if (match($0, /[0-9]+m/)) s += substr($0, RSTART, RLENGTH - 1) * 60
		if (match($0, /[0-9]+s/)) s += substr($0, RSTART, RLENGTH - 1)
		if ($0 != "") print s }')
	execs=$(sed -E 's/.*execs: ([0-9]+) .*/\1/' <<<"$last")
	news=$(sed -E 's/.*new interesting: ([0-9]+) .*/\1/' <<<"$last")
	rate=-
	[ -n "$secs" ] && [ "$secs" -gt 0 ] && rate=$((execs / secs))
	table+=$'\n'$(row "${pkg#./}.$name" "${execs:--}" "${secs:--}s" "$rate" "${news:--}" "$result")
	if [ "$result" = FAIL ]; then
		tail -40 "$log"
		input=$(sed -nE 's/.*Failing input written to (testdata\/fuzz\/[^ ]+).*/\1/p' "$log" | tail -1)
		if [ -n "$input" ]; then
			echo "fuzz: $name failed; its input: $pkg/$input (rerun: $GO test -run '$name/$(basename "$input")' $pkg)"
		else
			echo "fuzz: $name failed; see $log"
		fi
		status=1
		break
	fi
	[ -n "$SEEDS" ] && keep "$pkg" "$name"
done
echo
echo "$table"
exit $status
