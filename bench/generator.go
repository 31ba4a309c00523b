package bench

import (
	"math/rand"
	"strconv"
)

// Tag value sets of the TSBS devops use case, in the order the draws index
// them. Changing any of them changes every generated data set.
var (
	regions = []struct {
		name string
		dcs  []string
	}{
		{"us-east-1", []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"}},
		{"us-west-1", []string{"us-west-1a", "us-west-1b"}},
		{"us-west-2", []string{"us-west-2a", "us-west-2b", "us-west-2c"}},
		{"eu-west-1", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
		{"eu-central-1", []string{"eu-central-1a", "eu-central-1b"}},
		{"ap-southeast-1", []string{"ap-southeast-1a", "ap-southeast-1b"}},
		{"ap-southeast-2", []string{"ap-southeast-2a", "ap-southeast-2b"}},
		{"ap-northeast-1", []string{"ap-northeast-1a", "ap-northeast-1c"}},
		{"sa-east-1", []string{"sa-east-1a", "sa-east-1b", "sa-east-1c"}},
	}
	operatingSystems = []string{"Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"}
	architectures    = []string{"x64", "x86"}
	teams            = []string{"SF", "NYC", "LON", "CHI"}
	environments     = []string{"production", "staging", "test"}
)

// fieldKeys[j] is what precedes value j in a line: "usage_user=" for the
// first field, ",usage_system=" and so on for the others.
var fieldKeys = func() (keys [NumFields]string) {
	for j, name := range FieldNames {
		if j > 0 {
			name = "," + name
		}
		keys[j] = name + "="
	}
	return keys
}()

// Host is one host of a workload: its name and its tags, hostname first, in
// the order they appear in a line (which is not sorted by key).
type Host struct {
	Name string
	Tags [][2]string // {key, value} pairs
}

// Row is one row of a workload: the ten field values of one host at one
// time.
type Row struct {
	Host int   // index into Generator.Hosts
	Time int64 // nanoseconds since the Unix epoch
	// Ints holds the values, in FieldNames order, when the workload's Values
	// is ValuesInt; it is zero otherwise.
	Ints [NumFields]int64
	// Floats holds the values, in FieldNames order, when the workload's
	// Values is ValuesFloat; it is zero otherwise.
	Floats [NumFields]float64
}

// Generator yields the rows of a Workload in the peers harness's lpgen order
// and with exactly its values: time-major (every host at the first
// timestamp, host 0 first, then every host at the next one, ...). Given the
// same workload it writes, through AppendLine, the same bytes as
// `lpgen -scale -seed -timestamp-start -timestamp-end -log-interval -values`.
//
// A Generator is not safe for concurrent use.
type Generator struct {
	w        Workload // defaulted
	rng      *rand.Rand
	hosts    []Host
	prefixes [][]byte  // per host: "cpu,hostname=host_0,...,service_environment=staging "
	walks    []float64 // per host, NumFields current walk values

	ticks    int   // timestamps per host
	tick     int   // index of the next row's timestamp
	host     int   // index of the next row's host
	time     int64 // the next row's timestamp
	interval int64
}

// NewGenerator returns a generator positioned before the first row of the
// workload, zero fields taking their defaults. Hosts (tags and starting
// values) are drawn here, as lpgen does before writing anything.
//
// It panics if w.Validate fails: workloads are written by programmers, not
// read from untrusted input; call Validate first when they are.
func (w Workload) NewGenerator() *Generator {
	w.EnsureDefaults()
	ticks, err := w.ticks()
	if err != nil {
		panic(err)
	}
	g := &Generator{
		w:        w,
		rng:      rand.New(rand.NewSource(w.Seed)),
		hosts:    make([]Host, w.Scale),
		prefixes: make([][]byte, w.Scale),
		walks:    make([]float64, w.Scale*NumFields),
		ticks:    ticks,
		time:     w.Start.UnixNano(),
		interval: int64(w.Interval),
	}
	for i := range g.hosts {
		g.drawHost(i)
	}
	return g
}

// drawHost draws the tags and starting values of host i. The order of the
// draws is lpgen's and must not change.
func (g *Generator) drawHost(i int) {
	rng := g.rng
	r := regions[rng.Intn(len(regions))]
	name := "host_" + strconv.Itoa(i)
	h := Host{Name: name, Tags: [][2]string{
		{"hostname", name},
		{"region", r.name},
		{"datacenter", r.dcs[rng.Intn(len(r.dcs))]},
		{"rack", strconv.FormatInt(rng.Int63n(100), 10)},
		{"os", operatingSystems[rng.Intn(len(operatingSystems))]},
		{"arch", architectures[rng.Intn(len(architectures))]},
		{"team", teams[rng.Intn(len(teams))]},
		{"service", strconv.FormatInt(rng.Int63n(20), 10)},
		{"service_version", strconv.FormatInt(rng.Int63n(2), 10)},
		{"service_environment", environments[rng.Intn(len(environments))]},
	}}
	g.hosts[i] = h

	p := append([]byte(nil), Measurement...)
	for _, tag := range h.Tags {
		p = append(p, ',')
		p = append(p, tag[0]...)
		p = append(p, '=')
		p = append(p, tag[1]...)
	}
	g.prefixes[i] = append(p, ' ')

	walk := g.walks[i*NumFields : (i+1)*NumFields]
	for j := range walk {
		walk[j] = rng.Float64() * 100
	}
}

// Workload returns the generator's workload with its defaults filled in.
func (g *Generator) Workload() Workload { return g.w }

// Hosts returns the workload's hosts, indexed by Row.Host. The slice and the
// tags are owned by the generator and must not be modified.
func (g *Generator) Hosts() []Host { return g.hosts }

// Next stores the next row in *row and reports whether there was one; after
// the last row it returns false and leaves *row alone.
func (g *Generator) Next(row *Row) bool {
	if g.tick >= g.ticks || len(g.hosts) == 0 {
		return false
	}
	row.Host = g.host
	row.Time = g.time
	walk := (*[NumFields]float64)(g.walks[g.host*NumFields:])
	if g.w.Values == ValuesInt {
		for j, v := range walk {
			row.Ints[j] = int64(v)
		}
		row.Floats = [NumFields]float64{}
	} else {
		row.Floats = *walk
		row.Ints = [NumFields]int64{}
	}

	// Advance this host's walks for its next row, drawing after the row is
	// taken, as lpgen does; the draws after a host's last row are made too,
	// so they don't shift the draws of the hosts that follow it.
	for j, v := range walk {
		v += g.rng.NormFloat64()
		if v < 0 {
			v = 0
		} else if v > 100 {
			v = 100
		}
		walk[j] = v
	}

	g.host++
	if g.host == len(g.hosts) {
		g.host = 0
		g.tick++
		g.time += g.interval
	}
	return true
}

// AppendLine appends row as one line of InfluxDB line protocol, newline
// included, and returns the extended slice:
//
//	cpu,hostname=host_0,region=...,service_environment=... usage_user=58i,...,usage_guest_nice=3i 1451606400000000000
//
// The bytes are lpgen's: tags in Host.Tags order, integers with an "i"
// suffix, floats in their shortest round-trip form ('g' format). It
// allocates only when dst must grow (a line is a few hundred bytes). The row
// must come from this generator's Next; a Row.Host out of range panics.
func (g *Generator) AppendLine(dst []byte, row *Row) []byte {
	dst = append(dst, g.prefixes[row.Host]...)
	if g.w.Values == ValuesInt {
		for j, v := range row.Ints {
			dst = append(dst, fieldKeys[j]...)
			dst = strconv.AppendInt(dst, v, 10)
			dst = append(dst, 'i')
		}
	} else {
		for j, v := range row.Floats {
			dst = append(dst, fieldKeys[j]...)
			dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		}
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, row.Time, 10)
	return append(dst, '\n')
}
