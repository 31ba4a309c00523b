package lineproto

import (
	"fmt"
	"strings"
	"testing"
)

const tsbsLine = "cpu,hostname=host_0,region=eu-west-1,datacenter=eu-west-1a,rack=87,os=Ubuntu16.04LTS,arch=x64,team=NYC,service=18,service_version=1,service_environment=production usage_user=58i,usage_system=2i,usage_idle=24i,usage_nice=61i,usage_iowait=22i,usage_irq=63i,usage_softirq=6i,usage_steal=44i,usage_guest=80i,usage_guest_nice=38i 1451606400000000000"

const telegrafLine = "cpu,cpu=cpu0,host=server01 usage_guest=0,usage_guest_nice=0,usage_idle=92.07920792079207,usage_iowait=0.09900990099009901,usage_irq=0,usage_nice=0,usage_softirq=0.09900990099009901,usage_steal=0,usage_system=2.4752475247524752,usage_user=5.346534653465347 1714564800000000000"

// BenchmarkDecode decodes bodies of 5000 lines from 100 hosts: TSBS
// cpu-only lines (integers) and Telegraf cpu lines (floats), by Decode and
// by the reference parser alone. lines/s and ns/line compare the two.
func BenchmarkDecode(b *testing.B) {
	const lines = 5000
	for _, body := range []struct {
		name, line, host string
	}{{"tsbs", tsbsLine, "host_0,"}, {"telegraf", telegrafLine, "server01 "}} {
		var sb strings.Builder
		for i := 0; i < lines; i++ {
			h := strings.Replace(body.host, "0", fmt.Sprint(i%100), 1)
			sb.WriteString(strings.Replace(body.line, body.host, h, 1))
			sb.WriteByte('\n')
		}
		in := []byte(sb.String())
		for _, path := range []struct {
			name string
			ref  bool
		}{{"fast", false}, {"reference", true}} {
			b.Run(body.name+"/"+path.name, func(b *testing.B) {
				d := NewDecoder()
				d.referenceOnly = path.ref
				var res Result
				d.Decode(in, Nanosecond, testNow, &res) // fill the caches
				b.SetBytes(int64(len(in)))
				b.ReportAllocs()
				for b.Loop() {
					res.Reset()
					d.Decode(in, Nanosecond, testNow, &res)
				}
				if len(res.Measurements) != lines || res.Dropped != 0 {
					b.Fatalf("%d measurements: %v", len(res.Measurements), res.First)
				}
				n := float64(b.N) * lines
				b.ReportMetric(n/b.Elapsed().Seconds(), "lines/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/line")
			})
		}
	}
}
