#!/usr/bin/env bash
# Hourglass as a target of the peer-TSDB harness (a copy of its run_null.sh
# template): line protocol on /write?db=benchmark, q1/q2 as aggregates.
#
#   PEERS_HARNESS=/path/to/peers bench/peers/run_hourglass.sh
#
# Build the binary first: go build -o /tmp/peers/bin/hourglass ./cmd/hourglass
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS_HARNESS=${PEERS_HARNESS:-$HERE/../../../shared/peers}
source "$PEERS_HARNESS/lib.sh"

NAME=hourglass
PORT=${HOURGLASS_PORT:-7700}
DATA_DIR=$PEERS/$NAME
READY_URL=http://127.0.0.1:$PORT/healthz
WRITE_URL="http://127.0.0.1:$PORT/write?db=benchmark"
VERSION="hourglass $("$BIN/hourglass" version | cut -d' ' -f2)"
SERVER_CMD=("$BIN/hourglass" serve --listen 127.0.0.1:$PORT --data-dir "$DATA_DIR" --log-level warn)

# Write every bucket to disk and compact, so the size on disk is settled.
target_flush() { curl -fsS -XPOST "http://127.0.0.1:$PORT/v1/collections/benchmark/compact" >/dev/null; }

# Points held: measurements x 10 fields.
target_verify() { curl -fsS "http://127.0.0.1:$PORT/v1/collections/benchmark" | jq '.count * 10'; }

# Q1: max of usage_user for host_0 over (12:00, 13:00]: one window of an hour
#     starting just after 12:00.
# Q2: 1-minute averages of usage_user for host_0 over 12 h (720 windows).
target_queries() {
  qbench q1 "http://127.0.0.1:$PORT/v1/collections/benchmark/aggregate" -p 'q={"filter": {"tags.hostname": "host_0", "time": {"$gt": {"$date": "2016-01-01T12:00:00Z"}, "$lte": {"$date": "2016-01-01T13:00:00Z"}}}, "window": "1h", "origin": "2016-01-01T12:00:00.000000001Z", "groupBy": null, "fields": ["usage_user"], "funcs": ["max"]}'
  qbench q2 "http://127.0.0.1:$PORT/v1/collections/benchmark/aggregate" -p 'q={"filter": {"tags.hostname": "host_0", "time": {"$gte": {"$date": "2016-01-01T00:00:00Z"}, "$lt": {"$date": "2016-01-01T12:00:00Z"}}}, "window": "1m", "groupBy": null, "fields": ["usage_user"], "funcs": ["avg"]}'
}

SETTLE_STEP=${SETTLE_STEP:-2}
SETTLE_MAX=${SETTLE_MAX:-60}
run_target
