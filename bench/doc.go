// Package bench holds Hourglass's benchmark workloads (cpu-only, iot,
// high-cardinality), the loads and queries that run them against Hourglass
// and other line-protocol databases over HTTP or in process ("hourglass
// bench"), the TTL sweep benchmark, the charts of a run (points/s and
// batch latency), and the measurement of a server on the same machine
// through /proc (resident size, CPU time, data directories and their size
// on disk, settled).
// Their figures are in docs/benchmarks.md, each with the command that
// produced it.
//
// # Workload
//
// Workload describes the data set the peers harness (../shared/peers)
// measures every time-series database on: a TSBS cpu-only shaped set of
// Scale hosts, each with the ten TSBS devops tags (hostname, region,
// datacenter, rack, os, arch, team, service, service_version,
// service_environment) and one row of ten cpu fields (FieldNames) every
// Interval. Each field is a random walk started at U(0,100) with N(0,1)
// steps clamped to [0,100]. The zero Workload is the harness's default:
// 100 hosts every 10 s over 2016-01-01, 864,000 rows, 8,640,000 points, with
// integer values.
//
// Generator reproduces the harness's lpgen exactly: for the same parameters
// it yields the same rows in the same order (time-major), and AppendLine
// writes the same line-protocol bytes. Figures measured here on a Workload
// are therefore comparable with the peers' figures on the file lpgen writes.
// The generators use the standard library only.
//
// # Usage
//
//	w := bench.Workload{Scale: 10, Values: bench.ValuesFloat} // zero fields = defaults
//	fmt.Println(w.Rows(), w.Points())                          // 86400 864000
//	g := w.NewGenerator()
//	var (
//		row bench.Row
//		buf []byte
//	)
//	for g.Next(&row) {
//		buf = g.AppendLine(buf[:0], &row) // "cpu,hostname=host_0,... usage_user=...,... 1451606400000000000\n"
//		if _, err := out.Write(buf); err != nil {
//			return err
//		}
//	}
//
// Storage-level benchmarks skip the text and use the values directly:
// row.Host indexes g.Hosts() (name and tags), row.Time is in nanoseconds and
// row.Ints or row.Floats, depending on Values, holds the ten fields.
package bench
