#!/usr/bin/env bash
# Prometheus remote write into Hourglass and VictoriaMetrics, side by side
# in one run, three runs with fresh servers, the targets' order alternated
# (docs/benchmarks.md, "Prometheus remote write and PromQL, side by
# side"). HOURGLASS is the binary (default bin/hourglass).
B=${HOURGLASS:-bin/hourglass}
for i in 1 2 3; do
  hd=$(mktemp -d /tmp/rwh.XXXX); vd=$(mktemp -d /tmp/rwv.XXXX)
  $B serve --listen 127.0.0.1:7821 --mongo-listen 127.0.0.1:7822 --data-dir $hd > $hd.log 2>&1 & hp=$!
  /usr/bin/victoria-metrics -storageDataPath=$vd -httpListenAddr=127.0.0.1:8438 -retentionPeriod=100y -search.disableCache -selfScrapeInterval=0 -loggerLevel=WARN > $vd.log 2>&1 & vp=$!
  for k in $(seq 50); do curl -s 127.0.0.1:7821/healthz >/dev/null && curl -s 127.0.0.1:8438/health > /dev/null && break; sleep 0.2; done
  if [ $((i % 2)) = 1 ]; then T="http://127.0.0.1:7821 remote=http://127.0.0.1:8438/api/v1/write"; else T="remote=http://127.0.0.1:8438/api/v1/write http://127.0.0.1:7821"; fi
  $B bench ingest --format prom --workload iot --sensors 10000 --hours 1 --json $T 2>/dev/null | python3 -c '
import json,sys
for r in json.load(sys.stdin):
    print("run=%s %s samples/s=%.0f samples=%d bytes/sample=%s peakRSS=%s" % (sys.argv[1], r["target"], r["pointsPerSecond"], r["points"], r.get("bytesPerPoint"), r.get("peakRSSMiB")))' $i
  kill $hp $vp; wait $hp $vp 2>/dev/null; rm -rf $hd $vd $hd.log $vd.log
done
