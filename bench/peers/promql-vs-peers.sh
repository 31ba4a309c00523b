#!/usr/bin/env bash
# The TSBS cpu-only day as PromQL: line protocol into Hourglass and
# VictoriaMetrics, remote write into Prometheus, then bench query against
# the three as Prometheus APIs and Hourglass' own API (docs/benchmarks.md,
# "Prometheus remote write and PromQL, side by side"). HOURGLASS is the
# binary (default bin/hourglass).
B=${HOURGLASS:-bin/hourglass}
hd=$(mktemp -d /tmp/pqh.XXXX); vd=$(mktemp -d /tmp/pqv.XXXX); pd=$(mktemp -d /tmp/pqp.XXXX)
$B serve --listen 127.0.0.1:7821 --mongo-listen 127.0.0.1:7822 --data-dir $hd > $hd.log 2>&1 & hp=$!
/usr/bin/victoria-metrics -storageDataPath=$vd -httpListenAddr=127.0.0.1:8438 -retentionPeriod=100y -search.disableCache -selfScrapeInterval=0 -loggerLevel=WARN > $vd.log 2>&1 & vp=$!
cat > $pd/prometheus.yml <<EOT
global: {}
EOT
prometheus --config.file=$pd/prometheus.yml --storage.tsdb.path=$pd/data --web.listen-address=127.0.0.1:9099 --web.enable-remote-write-receiver --storage.tsdb.retention.time=100y --log.level=warn > $pd.log 2>&1 & pp=$!
for k in $(seq 100); do curl -s 127.0.0.1:7821/healthz >/dev/null && curl -s 127.0.0.1:8438/health > /dev/null && curl -s 127.0.0.1:9099/-/ready >/dev/null && break; sleep 0.2; done
$B bench ingest --settle 0 http://127.0.0.1:7821 influx=http://127.0.0.1:8438/write 2>&1 | tail -4
$B bench ingest --format prom --workers 1 --settle 0 remote=http://127.0.0.1:9099/api/v1/write 2>&1 | tail -3
curl -s -XPOST 127.0.0.1:8438/internal/force_flush; sleep 3
$B bench query --runs 20 prom=http://127.0.0.1:7821 prom=http://127.0.0.1:8438 prom=http://127.0.0.1:9099 http://127.0.0.1:7821 2>&1 | tail -40
kill $hp $vp $pp; wait $hp $vp $pp 2>/dev/null; rm -rf $hd $vd $pd $hd.log $vd.log $pd.log
