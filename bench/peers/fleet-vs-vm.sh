#!/usr/bin/env bash
# Sensor fleets into VictoriaMetrics and one or more Hourglass builds, side
# by side in one `hourglass bench ingest` run per round, fresh servers each
# round, the targets' order rotated (docs/benchmarks.md, the fleet
# sections).
#
#   HOURGLASS="bin/hourglass /tmp/before/hourglass" ROUNDS=3 \
#     bench/peers/fleet-vs-vm.sh --workload iot --sensors 10000 --hours 3
#
# HOURGLASS lists the builds (default bin/hourglass; each binary's name
# must start with "hourglass" for bench ingest to find its process); the
# first one runs the bench. The arguments go to bench ingest.
set -u
BINS=(${HOURGLASS:-bin/hourglass})
ROUNDS=${ROUNDS:-3}
for round in $(seq "$ROUNDS"); do
  dirs=() pids=() targets=()
  vd=$(mktemp -d /tmp/fleet-vm.XXXX); dirs+=("$vd")
  /usr/bin/victoria-metrics -storageDataPath="$vd" -httpListenAddr=127.0.0.1:8448 -retentionPeriod=100y \
    -search.disableCache -selfScrapeInterval=0 -loggerLevel=WARN > "$vd.log" 2>&1 & pids+=($!)
  targets+=("influx=http://127.0.0.1:8448/write")
  for i in "${!BINS[@]}"; do
    hd=$(mktemp -d /tmp/fleet-hg.XXXX); dirs+=("$hd")
    port=$((7940 + 2 * i))
    "${BINS[$i]}" serve --listen 127.0.0.1:$port --mongo-listen 127.0.0.1:$((port + 1)) --data-dir "$hd" \
      --log-level warn > "$hd.log" 2>&1 & pids+=($!)
    targets+=("http://127.0.0.1:$port")
  done
  for k in $(seq 100); do
    up=1
    curl -s 127.0.0.1:8448/health > /dev/null || up=0
    for i in "${!BINS[@]}"; do curl -s 127.0.0.1:$((7940 + 2 * i))/healthz > /dev/null || up=0; done
    [ $up = 1 ] && break
    sleep 0.2
  done
  # Rotate the order: each target goes first in turn.
  n=${#targets[@]}; r=$(( (round - 1) % n ))
  ordered=("${targets[@]:$r}" "${targets[@]:0:$r}")
  echo "round $round: ${ordered[*]}"
  "${BINS[0]}" bench ingest --settle 10s "$@" "${ordered[@]}"
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2> /dev/null || { echo "a server had stopped: ${dirs[$i]}.log:"; tail -5 "${dirs[$i]}.log"; }
  done
  kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null
  for d in "${dirs[@]}"; do rm -rf "$d" "$d.log"; done
done
