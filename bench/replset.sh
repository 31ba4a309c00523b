#!/usr/bin/env bash
# Replica set figures on one machine, in one run (docs/benchmarks.md,
# "Replica sets"):
#
#   1. single-node ingest of ROWS cpu-only rows (10 points each), and
#      VictoriaMetrics' when victoria-metrics is on PATH;
#   2. the same load into a three-member set (majority-acknowledged);
#   3. a follower stopped (SIGSTOP) during another such load: the time it
#      takes, once resumed, to apply what it missed (from the log);
#   4. a fourth member joining (--join) after the leader took a snapshot:
#      the time until it has applied everything (from the snapshot).
#
# usage: bench/replset.sh BINARY          (ROWS=100000 by default, at most
# 864000: the cpu-only workload's day of 100 hosts)
set -euo pipefail
BIN=${1:?usage: bench/replset.sh BINARY}
ROWS=${ROWS:-100000}
[ "$ROWS" -le 864000 ] || { echo "ROWS is at most 864000" >&2; exit 2; }
D=$(mktemp -d /tmp/hg-replset.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$D"
}
trap cleanup EXIT

json() { python3 -c "import sys, json; d = json.load(sys.stdin); print($1)"; }
now() { date +%s.%N; }
waitup() { for _ in $(seq 200); do curl -sf "http://$1${2:-/healthz}" >/dev/null && return; sleep 0.1; done; echo "no server at $1" >&2; exit 1; }
# applied is polled while a member catches up: no interpreter started per
# poll, which would take CPU from the member being timed.
applied() { curl -sf "http://$1/v1/replset?self=true" | grep -o '"appliedIndex":[0-9]*' | head -1 | cut -d: -f2; }
state() { curl -sf "http://$1/v1/replset?self=true" | json 'd["state"]' 2>/dev/null || echo down; }
ingest() { "$BIN" bench ingest --limit "$ROWS" --collection "$1" "${@:2}" 2>/dev/null; }

echo "# $(date -u +%FT%TZ) $("$BIN" version 2>/dev/null | head -1); $(nproc) cores; $ROWS rows (x10 points)"

# 1. Single node (and VictoriaMetrics).
"$BIN" serve --data-dir "$D/single" --listen 127.0.0.1:7710 --mongo-listen "" 2>"$D/single.log" &
PIDS+=($!)
waitup 127.0.0.1:7710
peers=()
if command -v victoria-metrics >/dev/null; then
	victoria-metrics -storageDataPath "$D/vm" -retentionPeriod=100y -search.disableCache -selfScrapeInterval=0 \
		-httpListenAddr 127.0.0.1:8428 >"$D/vm.log" 2>&1 &
	PIDS+=($!)
	waitup 127.0.0.1:8428 /health
	peers=(influx=http://127.0.0.1:8428/write)
fi
echo "## single node"
ingest cpu http://127.0.0.1:7710 "${peers[@]}"

# 2. Three members.
M=n1=127.0.0.1:7811/127.0.0.1:7711,n2=127.0.0.1:7812/127.0.0.1:7712,n3=127.0.0.1:7813/127.0.0.1:7713
declare -A PID
for i in 1 2 3; do
	"$BIN" serve --replica-set rs0 --node-id n$i --raft-listen 127.0.0.1:781$i --members "$M" \
		--listen 127.0.0.1:771$i --data-dir "$D/n$i" --mongo-listen "" --trailing-logs 4 --snapshot-threshold 64 \
		--log-format json 2>"$D/n$i.log" &
	PID[n$i]=$!
	PIDS+=($!)
done
for i in 1 2 3; do waitup 127.0.0.1:771$i; done
L=
for _ in $(seq 200); do
	for i in 1 2 3; do [ "$(state 127.0.0.1:771$i)" = leader ] && L=$i; done
	[ -n "$L" ] && break
	sleep 0.1
done
[ -n "$L" ] || { echo "no leader" >&2; exit 1; }
F=$((L % 3 + 1))
echo "## three members, leader n$L"
ingest cpu http://127.0.0.1:771$L

# 3. A follower behind by a load, from the log.
kill -STOP "${PID[n$F]}"
echo "## n$F stopped during this load"
ingest cpu2 http://127.0.0.1:771$L
target=$(applied 127.0.0.1:771$L)
t0=$(now)
kill -CONT "${PID[n$F]}"
until [ "$(applied 127.0.0.1:771$F 2>/dev/null || echo 0)" -ge "$target" ]; do sleep 0.05; done
t1=$(now)
python3 -c "s = $t1 - $t0; print(f'n$F caught up {$ROWS * 10:,} points (to index $target) in {s:.2f} s: {$ROWS * 10 / s:,.0f} points/s')"

# 4. A new member, from a snapshot.
curl -sf -X POST "http://127.0.0.1:771$L/v1/replset/snapshot" | json '"leader snapshot at %d in %d ms" % (d["snapshotIndex"], d["tookMillis"])'
target=$(applied 127.0.0.1:771$L)
t0=$(now)
"$BIN" serve --replica-set rs0 --node-id n4 --raft-listen 127.0.0.1:7814 --join 127.0.0.1:771$L \
	--listen 127.0.0.1:7714 --data-dir "$D/n4" --mongo-listen "" --log-format json 2>"$D/n4.log" &
PIDS+=($!)
waitup 127.0.0.1:7714
until [ "$(applied 127.0.0.1:7714 2>/dev/null || echo 0)" -ge "$target" ]; do sleep 0.05; done
t1=$(now)
python3 -c "s = $t1 - $t0; print(f'n4 joined and applied {2 * $ROWS * 10:,} points (to index $target) in {s:.2f} s: {2 * $ROWS * 10 / s:,.0f} points/s')"
grep -o '"msg":"replset: snapshot restored"[^}]*' "$D/n4.log" | head -1 || echo "n4 restored no snapshot"
count() { curl -sf "http://$1/v1/collections/$2" | json 'd["count"]'; }
for c in cpu cpu2; do
	echo "$c: $(count 127.0.0.1:771$L $c) measurements on the leader, $(count 127.0.0.1:7714 $c) on n4, $(count 127.0.0.1:771$F $c) on n$F"
done
du -sh "$D"/n? | sed 's/^/disk: /'
