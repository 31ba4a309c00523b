package promstore

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Series is a series read: its labels and its samples in time order.
type Series struct {
	Labels  labels.Labels
	Samples []Sample
}

// Sample is a float sample: a time in milliseconds since the epoch and a
// value.
type Sample struct {
	t int64
	f float64
}

// T is the sample's time in milliseconds since the epoch.
func (s *Sample) T() int64 { return s.t }

// F is the sample's value.
func (s *Sample) F() float64 { return s.f }

// seriesBytes is what a series costs besides its samples and label text:
// its slices' headers and the labels' strings' headers, roughly.
const seriesBytes = 128

// sampleBytes is what one sample read costs: its time and its value.
const sampleBytes = 16

// Read returns the series of the collection whose labels match every
// matcher, with their samples in [start, end] (milliseconds, both
// included), in label set order (as Prometheus' storage returns them),
// each with its samples in time order, bit for bit, duplicates (equal
// timestamps) included. Series of meta values that give one label set (a
// number and its text) are merged into one. The samples count against
// the Querier's limits (ErrSampleLimit, ErrMemoryLimit, ErrMemoryBusy)
// and are the caller's until the Querier is closed.
func (qr *Querier) Read(ctx context.Context, start, end int64, ms ...*labels.Matcher) ([]Series, error) {
	sc, ok, err := qr.scope(ctx, start, end, ms)
	if err != nil || !ok {
		return nil, err
	}
	return qr.read(ctx, sc, ms)
}

// read is Read of the range of sc, prepared by scope.
func (qr *Querier) read(ctx context.Context, sc readScope, ms []*labels.Matcher) ([]Series, error) {
	timeField, metaField, fields := sc.timeField, sc.metaField, sc.fields
	start, end := sc.start, sc.end
	if fields {
		return qr.readFields(ctx, timeField, metaField, start, end, ms)
	}
	filter, err := selectFilter(timeField, metaField, start, end, ms)
	if err != nil {
		return nil, err
	}
	value, err := qr.numberOnly(timeField, metaField, []string{ValueField})
	if err != nil || len(value) == 0 {
		return nil, err // no value field of numbers: no samples
	}
	var out []Series
	err = qr.q.svc.ReadNumbers(ctx, qr.q.collection, filter, value, func(key, _ string, ts []int64, vs []float64) error {
		if key == "null" {
			return nil
		}
		if ls, ok := MetaLabels(key); ok && matchAll(ms, ls) {
			return qr.appendSeries(&out, ls, ts, vs)
		}
		return nil
	})
	return qr.endRead(err, out)
}

// appendSeries appends to out the series of labels ls with the samples
// of times ts (nanoseconds, made milliseconds) and values vs, charged to
// the Querier's limits 4,096 at a time: a series past them counts what
// was charged before the charge that failed.
func (qr *Querier) appendSeries(out *[]Series, ls labels.Labels, ts []int64, vs []float64) error {
	if err := qr.charge(0, seriesBytes+int64(ls.ByteSize())); err != nil {
		return err
	}
	for left := int64(len(ts)); left > 0; {
		n := min(left, 4096)
		if err := qr.charge(n, n*sampleBytes); err != nil {
			return err
		}
		left -= n
	}
	samples := make([]Sample, len(ts))
	for i, t := range ts {
		samples[i] = Sample{t: t / 1e6, f: vs[i]}
	}
	*out = append(*out, Series{Labels: ls, Samples: samples})
	return nil
}

// endRead ends a read of series out: the read's error, and the series
// in label order, one a label set.
func (qr *Querier) endRead(err error, out []Series) ([]Series, error) {
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Series) int { return labels.Compare(a.Labels, b.Labels) })
	return mergeSeries(out), nil
}

// mergeSeries merges the series of equal label sets, adjacent in all (in
// label set order), into one, and puts each series' samples in time order
// where they are not: two meta values can give one label set (a number
// and its text, or a label of empty value and none), and Prometheus holds
// one series a label set.
func mergeSeries(all []Series) []Series {
	out := all[:0]
	for _, s := range all {
		if k := len(out) - 1; k >= 0 && labels.Equal(out[k].Labels, s.Labels) {
			out[k].Samples = append(out[k].Samples, s.Samples...)
			continue
		}
		out = append(out, s)
	}
	clear(all[len(out):])
	out = all[:len(out)]
	byTime := func(a, b Sample) int { return cmp.Compare(a.t, b.t) }
	for i := range out {
		// Stable: of equal timestamps, the first stored stays first.
		if ss := out[i].Samples; !slices.IsSortedFunc(ss, byTime) {
			slices.SortStableFunc(ss, byTime)
		}
	}
	return out
}

// labelSets returns the label sets of the series with samples in [start,
// end] that match every matcher, sorted and distinct, from the series
// index (no sample is decoded).
func (qr *Querier) labelSets(ctx context.Context, start, end int64, ms []*labels.Matcher) ([]labels.Labels, error) {
	sc, ok, err := qr.scope(ctx, start, end, ms)
	if err != nil || !ok {
		return nil, err
	}
	timeField, metaField, fields := sc.timeField, sc.metaField, sc.fields
	start, end = sc.start, sc.end
	if fields {
		return qr.fieldLabelSets(ctx, timeField, metaField, start, end, ms)
	}
	filter, err := selectFilter(timeField, metaField, start, end, ms)
	if err != nil {
		return nil, err
	}
	metas, err := qr.q.svc.DistinctMeta(ctx, qr.q.collection, metaField, filter)
	if err != nil {
		return nil, err
	}
	var out []labels.Labels
	for _, m := range metas {
		key, err := model.CanonicalMeta(m)
		if err != nil {
			continue
		}
		if ls, ok := MetaLabels(key); ok && matchAll(ms, ls) {
			if err := qr.charge(0, seriesBytes+int64(ls.ByteSize())); err != nil {
				return nil, err
			}
			out = append(out, ls)
		}
	}
	slices.SortFunc(out, labels.Compare)
	return slices.CompactFunc(out, labels.Equal), nil
}

// selectFilter is the filter of a read: the time range, and each matcher
// as a condition on the meta field the engine answers from its series
// index. A matcher whose condition the filter language cannot hold (a
// regex it does not take) is left to the check in Go alone.
func selectFilter(timeField, metaField string, start, end int64, ms []*labels.Matcher) (*partialfilter.Filter, error) {
	conds := []any{map[string]any{timeField: map[string]any{"$gte": timeOf(start), "$lte": timeOf(end)}}}
	for _, m := range ms {
		f := matcherFilter(metaField, m)
		if f == nil {
			continue
		}
		if _, err := partialfilter.Parse(f); err != nil {
			continue
		}
		conds = append(conds, f)
	}
	return partialfilter.Parse(map[string]any{"$and": conds})
}

// timeOf is a time in milliseconds as the filter language takes it.
func timeOf(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// matcherFilter is m as a condition on the meta field meta, or nil when
// the label name cannot be a path (it holds a dot, starts with '$' or
// holds a NUL byte). A series lacking the label matches as one whose
// value is "" (remote write stores no label of empty value).
func matcherFilter(meta string, m *labels.Matcher) map[string]any {
	if m.Name == "" || strings.ContainsAny(m.Name, ".\x00") || m.Name[0] == '$' {
		return nil
	}
	path := meta + "." + m.Name
	absent := map[string]any{path: map[string]any{"$exists": false}}
	present := map[string]any{path: map[string]any{"$exists": true}}
	switch m.Type {
	case labels.MatchEqual:
		if m.Value == "" {
			return absent
		}
		return map[string]any{path: m.Value}
	case labels.MatchNotEqual:
		if m.Value == "" {
			return present
		}
		return map[string]any{path: map[string]any{"$ne": m.Value}} // $ne matches the series lacking it
	case labels.MatchRegexp:
		// Prometheus' regexes are RE2, anchored at both ends.
		re := map[string]any{path: map[string]any{"$regex": "^(?s:" + m.Value + ")$"}}
		if m.Matches("") {
			return map[string]any{"$or": []any{re, absent}}
		}
		return re
	case labels.MatchNotRegexp:
		not := map[string]any{path: map[string]any{"$not": map[string]any{"$regex": "^(?s:" + m.Value + ")$"}}}
		if !m.Matches("") { // the regex matches "": a series lacking the label does not match
			return map[string]any{"$and": []any{not, present}}
		}
		return not
	}
	return nil
}

// matchAll reports whether ls matches every matcher; a label ls lacks has
// the value "", as Prometheus sees it.
func matchAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// MetaLabels returns the labels of a series from its meta key (the JSON of
// its meta document): each field of a string, number or boolean value,
// with its text; a field holding a document or an array, or of empty
// text, is not a label. A meta value that is not a document, or one that
// gives no label, is no series (ok false).
func MetaLabels(key string) (ls labels.Labels, ok bool) {
	b := labels.NewScratchBuilder(8)
	if !metaLabelTexts(key, func(name, text string) { b.Add(name, text) }) {
		return labels.EmptyLabels(), false
	}
	b.Sort()
	ls = b.Labels()
	return ls, !ls.IsEmpty()
}

// metaLabelTexts calls fn with the name and text of each field of the
// document that meta key encodes whose value is a string, a number or a
// boolean of non-empty text; ok is false when the key is not a document.
// The plain canonical form is read from the key as it is
// (model.MetaKeyFields); escapes and Extended JSON by a JSON decoder.
func metaLabelTexts(key string, fn func(name, text string)) (ok bool) {
	var pairs [16][2]string
	n := pairs[:0]
	if model.MetaKeyFields(key, func(name, raw string) {
		var text string
		switch c := raw[0]; {
		case c == '"':
			text = raw[1 : len(raw)-1] // no escape: MetaKeyFields read it
		case c == 't' || c == 'f' || c == '-' || c >= '0' && c <= '9':
			text = raw // a boolean, or a number's canonical text
		}
		if text != "" {
			n = append(n, [2]string{name, text})
		}
	}) {
		for _, p := range n {
			fn(p[0], p[1])
		}
		return true
	}
	d := json.NewDecoder(strings.NewReader(key))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil || doc == nil {
		return false
	}
	for k, v := range doc {
		if text, ok := labelText(v); ok && text != "" {
			fn(k, text)
		}
	}
	return true
}

// readScope is what a read of the collection needs to know: its fields,
// the range clamped to the engine's, and whether its samples are its
// numeric fields (fieldsShape).
type readScope struct {
	timeField, metaField string
	start, end           int64
	fields               bool
}

// scope prepares a read of [start, end] for matchers ms; ok is false when
// the collection cannot hold a matching sample (missing, the range out of
// the engine's, no name of it matching), and then nothing is counted as
// read.
func (qr *Querier) scope(ctx context.Context, start, end int64, ms []*labels.Matcher) (sc readScope, ok bool, err error) {
	sc.timeField, sc.metaField, ok, err = qr.collection(ctx)
	if err != nil || !ok {
		return sc, false, err
	}
	if sc.start, sc.end, ok = clampRange(start, end); !ok {
		return sc, false, nil
	}
	sc.fields = qr.fieldsShape(sc.timeField, sc.metaField)
	if ok, err = qr.mayHold(ctx, sc.timeField, sc.metaField, sc.fields, ms); err != nil || !ok {
		return sc, false, err
	}
	qr.scanned()
	return sc, true, nil
}
