package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// RemoteWriteHeaders are the headers of a Prometheus remote write 1.0
// request, as Prometheus sends them.
var RemoteWriteHeaders = map[string]string{
	"Content-Encoding":                  "snappy",
	"X-Prometheus-Remote-Write-Version": "0.1.0",
}

// RemoteWriteContentType is the media type of a remote write 1.0 body.
const RemoteWriteContentType = "application/x-protobuf"

// RemoteWriteEncoder returns an Encode for LoadConfig that turns a batch
// of the workloads' line protocol into a Prometheus remote write 1.0
// request, snappy-compressed: each field of a line a series
// <measurement>_<field> with the line's tags as labels and one sample at
// the line's time (milliseconds), as VictoriaMetrics maps line protocol.
// The workloads' lines have no escapes, quoted strings or booleans; any
// other line is an error. Each call's result is valid until the next.
func RemoteWriteEncoder() func(lines []byte) ([]byte, error) {
	var req prompb.WriteRequest
	var pb, out []byte
	return func(lines []byte) ([]byte, error) {
		req.Timeseries = req.Timeseries[:0]
		for len(lines) > 0 {
			line := lines
			if i := bytes.IndexByte(lines, '\n'); i >= 0 {
				line, lines = lines[:i], lines[i+1:]
			} else {
				lines = nil
			}
			if len(line) == 0 {
				continue
			}
			if err := appendLine(&req, line); err != nil {
				return nil, err
			}
		}
		n := req.Size()
		if cap(pb) < n {
			pb = make([]byte, n)
		}
		pb = pb[:n]
		if _, err := req.MarshalToSizedBuffer(pb); err != nil {
			return nil, err
		}
		out = snappy.Encode(out[:cap(out)], pb)
		return out, nil
	}
}

// appendLine adds the series of one line protocol line to req.
func appendLine(req *prompb.WriteRequest, line []byte) error {
	head, rest, ok := bytes.Cut(line, []byte{' '})
	fields, ts, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok || !ok2 {
		return fmt.Errorf("bench: line %.60q is not measurement,tags fields time", line)
	}
	nanos, err := strconv.ParseInt(string(ts), 10, 64)
	if err != nil {
		return fmt.Errorf("bench: line %.60q: time: %v", line, err)
	}
	parts := bytes.Split(head, []byte{','})
	measurement := string(parts[0])
	tags := make([]prompb.Label, 0, len(parts))
	for _, p := range parts[1:] {
		k, v, ok := bytes.Cut(p, []byte{'='})
		if !ok {
			return fmt.Errorf("bench: line %.60q: tag %q", line, p)
		}
		tags = append(tags, prompb.Label{Name: string(k), Value: string(v)})
	}
	for f := range bytes.SplitSeq(fields, []byte{','}) {
		k, v, ok := bytes.Cut(f, []byte{'='})
		if !ok {
			return fmt.Errorf("bench: line %.60q: field %q", line, f)
		}
		v = bytes.TrimSuffix(v, []byte{'i'})
		x, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("bench: line %.60q: field %q: %v", line, f, err)
		}
		labels := make([]prompb.Label, 0, len(tags)+1)
		labels = append(labels, prompb.Label{Name: "__name__", Value: measurement + "_" + string(k)})
		labels = append(labels, tags...)
		// In name order, as Prometheus sends them.
		slices.SortFunc(labels, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: labels,
			Samples: []prompb.Sample{{Value: x, Timestamp: nanos / 1e6}}})
	}
	return nil
}
