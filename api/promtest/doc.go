// Package promtest holds tests only: a real Prometheus server scrapes
// itself and remote-writes its samples to an api.Server on a loopback
// port, and the stored series are checked through the HTTP API; remote
// read is checked through Prometheus' own PromQL; and the queries of
// testdata/promql.txt are asked of both servers' query APIs at the same
// times, whose answers must be equal (TestPromQLDifferential).
package promtest
