package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/api/lineproto"
)

func iotBytes(w IoT) []byte {
	next := w.NewLineWriter()
	var out []byte
	for {
		var ok bool
		if out, ok = next(out); !ok {
			return out
		}
	}
}

// TestIoTDeterministic: the same parameters give the same bytes; another
// seed others.
func TestIoTDeterministic(t *testing.T) {
	w := IoT{Sensors: 50, Span: 10 * time.Minute}
	a, b := sha256.Sum256(iotBytes(w)), sha256.Sum256(iotBytes(w))
	if a != b {
		t.Fatal("two runs differ")
	}
	w.Seed = 2
	if c := sha256.Sum256(iotBytes(w)); c == a {
		t.Fatal("another seed gives the same data")
	}
}

// TestIoTShape decodes the workload with the server's line-protocol
// decoder and checks counts, fields, jitter and the late share.
func TestIoTShape(t *testing.T) {
	w := IoT{Sensors: 200, Fields: 3, Span: 30 * time.Minute, Late: 0.05}
	w.EnsureDefaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	body := iotBytes(w)
	var res lineproto.Result
	lineproto.NewDecoder().Decode(body, lineproto.Nanosecond, time.Now(), &res)
	if res.Dropped != 0 || len(res.Measurements) != w.Rows() || w.Rows() != 200*180 {
		t.Fatalf("%d measurements of %d rows, %d dropped: %v", len(res.Measurements), w.Rows(), res.Dropped, res.First)
	}
	late, series := 0, map[any]bool{}
	for i, m := range res.Measurements {
		if len(m.Fields) != 3 {
			t.Fatalf("row %d has %d fields", i, len(m.Fields))
		}
		series[m.Meta] = true
		tick := int64(i / w.Sensors)
		nominal := w.Start.UnixNano() + tick*int64(w.Interval)
		d := m.Time - nominal
		if d < -int64(w.Interval)/10-int64(w.LateBy) || d > int64(w.Interval)/10 {
			t.Fatalf("row %d is %v off its slot", i, time.Duration(d))
		}
		if d < -int64(w.Interval)/10 {
			late++
		}
	}
	if len(series) != 200 {
		t.Fatalf("%d series, want 200", len(series))
	}
	share := float64(late) / float64(len(res.Measurements))
	if share < 0.03 || share > 0.06 {
		t.Fatalf("late share %.3f, want about 0.05 (a few late points fall inside the jitter)", share)
	}
	for _, bad := range []IoT{{Fields: 4}, {Sensors: -1}, {Jitter: 0.7}, {Late: 2}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// With a Precision every time is a multiple of it, and the workload is
// otherwise the same: each time is the nanosecond one rounded down.
func TestIoTPrecision(t *testing.T) {
	decode := func(w IoT) []int64 {
		t.Helper()
		w.EnsureDefaults()
		if err := w.Validate(); err != nil {
			t.Fatal(err)
		}
		var res lineproto.Result
		lineproto.NewDecoder().Decode(iotBytes(w), lineproto.Nanosecond, time.Now(), &res)
		ts := make([]int64, len(res.Measurements))
		for i, m := range res.Measurements {
			ts[i] = m.Time
		}
		return ts
	}
	w := IoT{Sensors: 50, Span: 10 * time.Minute}
	ns := decode(w)
	w.Precision = time.Millisecond
	ms := decode(w)
	if len(ms) != len(ns) {
		t.Fatalf("%d rows in ms, %d in ns", len(ms), len(ns))
	}
	subMs := 0
	for i := range ms {
		if ms[i]%1e6 != 0 || ms[i] != ns[i]-ns[i]%1e6 {
			t.Fatalf("row %d: %d, from %d", i, ms[i], ns[i])
		}
		if ns[i]%1e6 != 0 {
			subMs++
		}
	}
	if subMs < len(ns)/2 {
		t.Fatalf("only %d of %d nanosecond times have digits below the millisecond", subMs, len(ns))
	}
	for _, bad := range []IoT{{Precision: -1}, {Precision: time.Minute}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestLoadIoT(t *testing.T) {
	f := &fakeTarget{}
	srv := newFakeServer(f)
	defer srv.Close()
	src := IoT{Sensors: 30, Span: 5 * time.Minute, Fields: 1}
	res, err := Load(context.Background(), LoadConfig{Source: src, URL: srv.URL, BatchRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 30*30 || res.Points != 30*30 || f.lines.Load() != 30*30 {
		t.Fatalf("%+v, target saw %d lines", res, f.lines.Load())
	}
}

// TestIoTJSON: the JSON form carries the same times and values, with the
// meta value as a sub-document.
func TestIoTJSON(t *testing.T) {
	for _, w := range []IoT{
		{Sensors: 20, Span: 2 * time.Minute, Fields: 3},
		{Sensors: 20, Span: 2 * time.Minute, Fields: 1, Precision: time.Millisecond},
		{Sensors: 20, Span: 2 * time.Minute, Fields: 2, Precision: time.Second},
	} {
		checkIoTJSON(t, w)
	}
}

// checkIoTJSON checks that the JSON form of w holds the rows of its line
// protocol, dates written as time.RFC3339Nano writes them.
func checkIoTJSON(t *testing.T, w IoT) {
	t.Helper()
	next := w.JSON().NewLineWriter()
	lines := w.NewLineWriter()
	var lp []byte
	var res lineproto.Result
	for i := 0; ; i++ {
		doc, ok := next(nil)
		var ok2 bool
		lp, ok2 = lines(lp[:0])
		if ok != ok2 {
			t.Fatalf("row %d: the JSON and line forms end apart", i)
		}
		if !ok {
			if i != w.Rows() {
				t.Fatalf("%d rows, want %d", i, w.Rows())
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("row %d: %v: %s", i, err, doc)
		}
		res.Reset()
		lineproto.NewDecoder().Decode(lp, lineproto.Nanosecond, time.Now(), &res)
		want := res.Measurements[0]
		if date, want := m["time"].(map[string]any)["$date"], time.Unix(0, want.Time).UTC().Format(time.RFC3339Nano); date != want {
			t.Fatalf("row %d: time %v, want %s", i, date, want)
		}
		sensor := m["sensor"].(map[string]any)
		if sensor["id"] == "" || sensor["site"] == nil || sensor["kind"] == nil || sensor["floor"] == nil {
			t.Fatalf("row %d: sensor %v", i, sensor)
		}
		for _, f := range want.Fields {
			got, ok := m[f.Name].(float64)
			wantV := f.Value.F
			if f.Value.Kind == model.KindInt {
				wantV = float64(f.Value.I)
			}
			if !ok || got != wantV {
				t.Fatalf("row %d: %s = %v, want %v", i, f.Name, m[f.Name], wantV)
			}
		}
	}
}

// BenchmarkIoTLines: the cost of writing the iot workload's rows as line
// protocol and as NDJSON, which the load generator pays on the machine it
// shares with the server it loads.
func BenchmarkIoTLines(b *testing.B) {
	w := IoT{Span: 24 * time.Hour}
	w.EnsureDefaults()
	for _, f := range []struct {
		name string
		src  LineSource
	}{{"lp", w}, {"json", w.JSON()}} {
		b.Run(f.name, func(b *testing.B) {
			next := f.src.NewLineWriter()
			buf := make([]byte, 0, 1<<16)
			total := 0
			b.ReportAllocs()
			for range b.N {
				var ok bool
				if buf, ok = next(buf[:0]); !ok {
					b.Fatal("workload ended early")
				}
				total += len(buf)
			}
			b.ReportMetric(float64(total)/float64(b.N), "B/row")
		})
	}
}
