package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// referenceRemoteWrite is a remote write request of lines built with
// prompb's types and Marshal, the request RemoteWriteEncoder must write.
func referenceRemoteWrite(t testing.TB, lines []byte) []byte {
	t.Helper()
	var req prompb.WriteRequest
	for line := range bytes.SplitSeq(lines, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		head, rest, _ := bytes.Cut(line, []byte{' '})
		fields, ts, _ := bytes.Cut(rest, []byte{' '})
		nanos, err := strconv.ParseInt(string(ts), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(head), ",")
		var tags []prompb.Label
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			tags = append(tags, prompb.Label{Name: k, Value: v})
		}
		for _, f := range strings.Split(string(fields), ",") {
			k, v, _ := strings.Cut(f, "=")
			x, err := strconv.ParseFloat(strings.TrimSuffix(v, "i"), 64)
			if err != nil {
				t.Fatal(err)
			}
			ls := append([]prompb.Label{{Name: "__name__", Value: parts[0] + "_" + k}}, tags...)
			slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls,
				Samples: []prompb.Sample{{Value: x, Timestamp: nanos / 1e6}}})
		}
	}
	b, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lineBytes(next func([]byte) ([]byte, bool)) []byte {
	var out []byte
	for ok := true; ok; {
		out, ok = next(out)
	}
	return out
}

// TestRemoteWriteEncoder: the encoder writes, for the workloads' lines and
// for lines of zero values and times, negative ones, integers, unsorted
// tags and a tag of empty value, the bytes prompb writes for the same
// request, batch after batch with one encoder.
func TestRemoteWriteEncoder(t *testing.T) {
	batches := [][]byte{
		[]byte("m,z=1,a=2 f=1.5,g=0,h=-0,i=5i,j=-3.25 1700000000123456789\n" +
			"m,a= x=1e300 0\n" +
			"n y=-7i -1500000000\n\n" +
			"cpu,hostname=host_0,region=eu usage_user=42i 1451606400000000000"),
		lineBytes(Workload{End: DefaultStart.Add(30 * time.Second)}.NewLineWriter()),
		lineBytes(Workload{End: DefaultStart.Add(30 * time.Second), Values: ValuesFloat}.NewLineWriter()),
		lineBytes(IoT{Sensors: 300, Span: 2 * time.Minute}.NewLineWriter()),
		[]byte("m a=1 1\n"),
	}
	enc := RemoteWriteEncoder()
	for i, lines := range batches {
		got, err := enc(lines)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		pb, err := snappy.Decode(nil, got)
		if err != nil {
			t.Fatalf("batch %d: snappy: %v", i, err)
		}
		if want := referenceRemoteWrite(t, lines); !bytes.Equal(pb, want) {
			var a, b prompb.WriteRequest
			_, _ = a.Unmarshal(pb), b.Unmarshal(want)
			t.Fatalf("batch %d (%d lines): %d bytes, prompb's %d\n got  %v\n want %v", i, bytes.Count(lines, []byte{'\n'}), len(pb), len(want),
				head(a.Timeseries), head(b.Timeseries))
		}
	}
	for _, bad := range []string{"m f=1", "m,a f=1 1", "m f 1", "m f=x 1", "m f=1 x"} {
		if _, err := enc([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func head(ts []prompb.TimeSeries) string {
	return fmt.Sprint(ts[:min(3, len(ts))])
}

// BenchmarkRemoteWriteEncoder: a batch of 5,000 iot lines (10,000 series)
// made a remote write request, as `hourglass bench ingest --format prom`
// makes each.
func BenchmarkRemoteWriteEncoder(b *testing.B) {
	lines := lineBytes(IoT{Sensors: 5000, Span: 10 * time.Second}.NewLineWriter())
	enc := RemoteWriteEncoder()
	b.SetBytes(int64(len(lines)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc(lines); err != nil {
			b.Fatal(err)
		}
	}
}
