//go:build ignore

// Command sensors writes the sample sensor data of testdata/sensors: the
// same measurements as a JSON array, as NDJSON and as InfluxDB line
// protocol (testdata/README.md says what they hold). Run from the module
// root:
//
//	go run testdata/gen/sensors.go -out testdata/sensors
//
// The output depends only on the fixed seed: running it again writes the
// same bytes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// start is the first instant of the hour the samples cover.
var start = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// sensor is one series: how often it reports, how far after the period's
// start, and whether it has a battery.
type sensor struct {
	name, site string
	every      time.Duration
	offset     time.Duration
	base       float64 // mean temperature
	battery    bool
}

var sensors = []sensor{
	{name: "s1", site: "north", every: 30 * time.Second, offset: 250 * time.Millisecond, base: 21},
	{name: "s2", site: "north", every: time.Minute, base: 18.5},
	{name: "s3", site: "south", every: 2 * time.Minute, offset: 1500 * time.Millisecond, base: 24, battery: true},
}

// point is one measurement. hum < 0 means the row has no hum field;
// batt < 0 means no batt field.
type point struct {
	s      *sensor
	t      time.Time
	temp   float64
	hum    int64
	status string
	open   bool
	batt   float64
}

func main() {
	out := flag.String("out", "testdata/sensors", "directory to write into")
	flag.Parse()
	rng := rand.New(rand.NewPCG(14, 7))
	var pts []point
	for i := range sensors {
		s := &sensors[i]
		batt := 3.9
		for k := 0; time.Duration(k)*s.every+s.offset < time.Hour; k++ {
			t := start.Add(time.Duration(k)*s.every + s.offset)
			p := point{s: s, t: t, hum: 35 + rng.Int64N(25), batt: -1, status: "ok"}
			// A swing over the hour plus noise, kept to one decimal so that some
			// values are whole numbers (still floats).
			p.temp = math.Round((s.base+1.5*math.Sin(float64(k)*s.every.Minutes()/9)+rng.NormFloat64()*0.4)*10) / 10
			if p.temp > s.base+1.8 {
				p.status = "warn"
			}
			if k%7 == 3 {
				p.hum = -1 // the hygrometer missed this reading
			}
			p.open = rng.IntN(4) == 0
			if s.battery {
				batt -= 0.015 + rng.Float64()*0.01
				p.batt = math.Round(batt*1000) / 1000
				if p.batt < 3.5 {
					p.status = "low battery"
				}
			}
			pts = append(pts, p)
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t.Before(pts[j].t) })
	// One point arrives late: s2's reading of 10:17:30.125 comes after the
	// rest of the hour.
	late := point{s: &sensors[1], t: start.Add(17*time.Minute + 30*time.Second + 125*time.Millisecond),
		temp: 19.4, hum: 41, status: "ok", open: true, batt: -1}
	pts = append(pts, late)

	var arr, nd, lp bytes.Buffer
	arr.WriteString("[\n")
	for i, p := range pts {
		if i > 0 {
			arr.WriteString(",\n")
		}
		arr.WriteString(" ")
		arr.Write(jsonDoc(p, fmt.Sprintf(`{"$date": %q}`, p.t.Format(time.RFC3339Nano))))
		nd.Write(jsonDoc(p, fmt.Sprintf(`{"$date": {"$numberLong": "%d"}}`, p.t.UnixMilli())))
		nd.WriteByte('\n')
		lp.Write(lineOf(p))
		lp.WriteByte('\n')
	}
	arr.WriteString("\n]\n")
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, b := range map[string][]byte{"sensors.json": arr.Bytes(), "sensors.ndjson": nd.Bytes(), "sensors.lp": lp.Bytes()} {
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("%d measurements", len(pts))
}

// jsonFloat writes f so that it reads back as a double: with a fraction.
func jsonFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !bytes.ContainsAny([]byte(s), ".eE") {
		s += ".0"
	}
	return s
}

// jsonDoc is the document of p with its time written as date.
func jsonDoc(p point, date string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"time": %s, "tags": {"_measurement": "env", "sensor": %q, "site": %q}, "temp": %s`,
		date, p.s.name, p.s.site, jsonFloat(p.temp))
	if p.hum >= 0 {
		fmt.Fprintf(&b, `, "hum": %d`, p.hum)
	}
	fmt.Fprintf(&b, `, "status": %q, "open": %t`, p.status, p.open)
	if p.batt >= 0 {
		fmt.Fprintf(&b, `, "batt": %s`, jsonFloat(p.batt))
	}
	b.WriteString("}")
	return b.Bytes()
}

// lineOf is p in line protocol, time in milliseconds.
func lineOf(p point) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "env,sensor=%s,site=%s temp=%s", p.s.name, p.s.site, strconv.FormatFloat(p.temp, 'f', -1, 64))
	if p.hum >= 0 {
		fmt.Fprintf(&b, ",hum=%di", p.hum)
	}
	fmt.Fprintf(&b, ",status=%q,open=%t", p.status, p.open)
	if p.batt >= 0 {
		fmt.Fprintf(&b, ",batt=%s", strconv.FormatFloat(p.batt, 'f', -1, 64))
	}
	fmt.Fprintf(&b, " %d", p.t.UnixMilli())
	return b.Bytes()
}
