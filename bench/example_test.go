package bench_test

import (
	"fmt"

	"github.com/hourglassdb/hourglass/bench"
)

func ExampleWorkload() {
	w := bench.Workload{Scale: 10, Values: bench.ValuesFloat}
	fmt.Println(w.Ticks(), w.Rows(), w.Points())
	// Output: 8640 86400 864000
}

// The first line of the default workload, as lpgen writes it.
func ExampleGenerator_AppendLine() {
	g := bench.Workload{}.NewGenerator()
	var row bench.Row
	g.Next(&row)
	fmt.Print(string(g.AppendLine(nil, &row)))
	// Output:
	// cpu,hostname=host_0,region=ap-southeast-1,datacenter=ap-southeast-1b,rack=43,os=Ubuntu15.10,arch=x86,team=CHI,service=8,service_version=1,service_environment=staging usage_user=38i,usage_system=51i,usage_idle=50i,usage_nice=1i,usage_iowait=93i,usage_irq=27i,usage_softirq=20i,usage_steal=27i,usage_guest=15i,usage_guest_nice=85i 1451606400000000000
}
