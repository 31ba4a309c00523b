#!/bin/bash
# Backup figures on stores bench ingest makes (docs/benchmarks.md, "Backup and
# restore"): a fresh server on loopback, a load, a full backup, one more hour
# of the workload, an incremental backup, then a restore. HOURGLASS names the
# binary (default: hourglass on the PATH).
set -u
HG=${HOURGLASS:-hourglass}
run() {
  wl=$1; extra=$2
  base=$(mktemp -d /tmp/bb.XXXX); tgt=$base/target
  $HG serve --data-dir $base/data --listen 127.0.0.1:7811 --mongo-listen "" --log-level warn > $base/srv.log 2>&1 &
  pid=$!
  for i in $(seq 50); do curl -sf localhost:7811/healthz >/dev/null && break; sleep 0.2; done
  $HG bench ingest --workload $wl $extra --settle 0 --json http://127.0.0.1:7811 > $base/ingest.json 2>/dev/null
  pts=$(python3 -c "import json;d=json.load(open('$base/ingest.json'));t=d['targets'][0] if 'targets' in d else d[0];print(t.get('points'))" 2>/dev/null)
  r1=$(curl -s -XPOST localhost:7811/v1/admin/backup -d "{\"to\": \"file://$tgt\"}")
  # more data: the same workload, one more hour
  $HG bench ingest --workload $wl $extra --hours 1 --settle 0 --json --collection more http://127.0.0.1:7811 > /dev/null 2>&1
  r2=$(curl -s -XPOST localhost:7811/v1/admin/backup -d "{\"to\": \"file://$tgt\"}")
  kill $pid; wait $pid 2>/dev/null
  s=$(date +%s.%N); $HG restore --from file://$tgt --data-dir $base/restored > /dev/null 2>&1; e=$(date +%s.%N)
  echo "$wl $extra points=$pts"
  echo "  full: $r1"
  echo "  incremental: $r2"
  echo "  restore: $(python3 -c "print(round($e-$s,2))") s, $(du -sb $base/restored | cut -f1) bytes"
  rm -rf $base
}
run cpu-only ""
run high-cardinality ""
