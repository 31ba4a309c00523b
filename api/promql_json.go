package api

import (
	"bufio"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/hourglassdb/hourglass/document"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// writePromResult replies with a query's result in Prometheus' shape,
// {"status":"success","data":{"resultType":...,"result":...}}, written as
// it is encoded, a series at a time: the reply's bytes are never held
// whole (the result itself is bounded by --promql-max-samples). Times are
// seconds with the milliseconds as decimals and values strings, as
// Prometheus writes them (web/api/v1's codec). An empty vector or matrix
// is [].
func writePromResult(w http.ResponseWriter, v parser.Value, warnings, infos []string) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	b := make([]byte, 0, 4<<10)
	b = append(b, `{"status":"success","data":{"resultType":"`...)
	b = append(b, v.Type()...)
	b = append(b, `","result":`...)
	switch v := v.(type) {
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPromSeries(b, s)
			if len(b) >= 16<<10 {
				if _, err := bw.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		b = append(b, ']')
	case promql.Vector:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPromSample(b, s)
			if len(b) >= 16<<10 {
				if _, err := bw.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		b = append(b, ']')
	case promql.Scalar:
		b = append(b, '[')
		b = appendPromTime(b, v.T)
		b = append(b, ',')
		b = appendPromFloat(b, v.V)
		b = append(b, ']')
	case promql.String:
		b = append(b, '[')
		b = appendPromTime(b, v.T)
		b = append(b, ',')
		b = appendJSONString(b, v.V)
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	b = append(b, '}')
	for _, list := range []struct {
		key  string
		msgs []string
	}{{"warnings", warnings}, {"infos", infos}} {
		if len(list.msgs) == 0 {
			continue
		}
		b = append(b, `,"`+list.key+`":[`...)
		for i, m := range list.msgs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m)
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// appendPromSeries appends a series of a matrix: {"metric":{...},
// "values":[[t,"v"],...]} (and "histograms" for native histograms, which
// Hourglass does not store but a function could make).
func appendPromSeries(b []byte, s promql.Series) []byte {
	b = append(b, `{"metric":`...)
	b = appendPromLabels(b, s.Metric)
	if len(s.Floats) > 0 {
		b = append(b, `,"values":[`...)
		for i, p := range s.Floats {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendPromTime(b, p.T)
			b = append(b, ',')
			b = appendPromFloat(b, p.F)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	if len(s.Histograms) > 0 {
		b = append(b, `,"histograms":[`...)
		for i, p := range s.Histograms {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPromHistogramPoint(b, p.T, p.H)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendPromSample appends a sample of a vector: {"metric":{...},
// "value":[t,"v"]} (or "histogram").
func appendPromSample(b []byte, s promql.Sample) []byte {
	b = append(b, `{"metric":`...)
	b = appendPromLabels(b, s.Metric)
	if s.H != nil {
		b = append(b, `,"histogram":`...)
		b = appendPromHistogramPoint(b, s.T, s.H)
		return append(b, '}')
	}
	b = append(b, `,"value":[`...)
	b = appendPromTime(b, s.T)
	b = append(b, ',')
	b = appendPromFloat(b, s.F)
	return append(b, "]}"...)
}

// appendPromHistogramPoint appends [t, histogram] as promql.HPoint
// marshals it.
func appendPromHistogramPoint(b []byte, t int64, h *histogram.FloatHistogram) []byte {
	hb, err := json.Marshal(promql.HPoint{T: t, H: h})
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, hb...)
}

// appendPromLabels appends a label set as a JSON object, in label order.
func appendPromLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, l.Name)
		b = append(b, ':')
		b = appendJSONString(b, l.Value)
	})
	return append(b, '}')
}

// appendPromTime appends t (milliseconds) as seconds with the milliseconds
// as decimals when there are any, as Prometheus writes times
// (util/jsonutil.MarshalTimestamp): 1714564800, 1714564800.5 is written
// 1714564800.500.
func appendPromTime(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if f := t % 1000; f != 0 {
		b = append(b, '.')
		if f < 100 {
			b = append(b, '0')
		}
		if f < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, f, 10)
	}
	return b
}

// appendPromFloat appends a value as a JSON string, as Prometheus writes
// values (util/jsonutil.MarshalFloat): NaN, +Inf, -Inf, exponents only
// below 1e-6 and from 1e21.
func appendPromFloat(b []byte, f float64) []byte {
	b = append(b, '"')
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	return append(b, '"')
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte { return document.AppendJSONString(b, s, true) }

// writePromLabelSets replies to a series request with the label sets ls
// and warnings, as writeJSON writes a promSuccess of them, encoded by
// hand: a series list of a fleet is thousands of label sets, which
// encoding/json would turn into maps first.
func writePromLabelSets(w http.ResponseWriter, ls []labels.Labels, warnings []string) {
	b := make([]byte, 0, 64+96*len(ls))
	b = append(b, `{"status":"success","data":[`...)
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPromLabels(b, l)
	}
	b = append(b, ']')
	if len(warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, s := range warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
