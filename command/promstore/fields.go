package promstore

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// measurementLabel is the meta field in which the line-protocol endpoints
// keep a line's measurement (a tag set's _measurement).
const measurementLabel = "_measurement"

// fieldsShape reports whether the samples of a collection with these
// time and meta fields are its numeric fields, each a series: any
// collection but one of remote write's shape (its time and meta fields,
// and no field but the value and the made _id). As API.md has it, a line's field f of
// measurement m is the series m_f with the line's tags as labels, and any
// other collection's numeric field f the series <collection>_f with the
// fields of the meta document as labels (a meta value that is not a
// document is the label named after the metaField). A line-protocol
// collection holding a field named value is of this shape: its series
// are m_value.
func (qr *Querier) fieldsShape(timeField, metaField string) bool {
	if timeField != TimeField || metaField != MetaField {
		return true
	}
	h, err := qr.q.svc.DB().Collection(qr.q.collection)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(h.FieldNames(), func(f string) bool { return f != ValueField && f != "_id" })
}

// readFields is Read on a collection of the fields shape. Every matcher
// is checked in Go; some also narrow the read (fieldsPushdown): a label
// equal to a string picks the series by their meta value in the series
// index, and a name picks the fields that can make it. The engine gives
// each series' numbers a field at a time (timeseries.DB.ReadNumbers).
func (qr *Querier) readFields(ctx context.Context, timeField, metaField string, start, end int64, ms []*labels.Matcher) ([]Series, error) {
	filter, numeric, err := qr.fieldsRead(timeField, metaField, start, end, ms)
	if err != nil || len(numeric) == 0 {
		return nil, err
	}
	var (
		out     []Series
		lastKey string
		seen    bool
		base    fieldBase
	)
	err = qr.q.svc.ReadNumbers(ctx, qr.q.collection, filter, numeric, func(key, field string, ts []int64, vs []float64) error {
		if !seen || key != lastKey {
			seen, lastKey = true, key
			base = fieldBaseOf(key, metaField, qr.q.collection)
		}
		if ls := base.labels(field); matchAll(ms, ls) {
			return qr.appendSeries(&out, ls, ts, vs)
		}
		return nil
	})
	return qr.endRead(err, out)
}

// fieldsRead is what a read of [start, end] of a fields-shaped collection
// asks of the engine: its filter (fieldsFilter) and the fields of numbers
// only that the matchers let make a series (numberOnly); none, nothing is
// read.
func (qr *Querier) fieldsRead(timeField, metaField string, start, end int64, ms []*labels.Matcher) (*partialfilter.Filter, []string, error) {
	filter, fields, err := fieldsFilter(timeField, metaField, start, end, ms)
	if err != nil {
		return nil, nil, err
	}
	numeric, err := qr.numberOnly(timeField, metaField, fields)
	return filter, numeric, err
}

// numberOnly returns the fields of the collection (of fields; nil: all)
// but the time and meta fields that never held anything but numbers:
// those a read gives samples of (a field that held text too is read as
// text).
func (qr *Querier) numberOnly(timeField, metaField string, fields []string) ([]string, error) {
	h, err := qr.q.svc.DB().Collection(qr.q.collection)
	if err != nil {
		return nil, err
	}
	var out []string
	for f, types := range h.Fields() {
		if f != timeField && f != metaField && (fields == nil || slices.Contains(fields, f)) &&
			!slices.ContainsFunc(types, func(t string) bool { return !slices.Contains(numberTypes, t) }) {
			out = append(out, f)
		}
	}
	return out, nil
}

// fieldLabelSets is labelSets on a collection of the fields shape: a
// series is a meta value and a field of numbers only holding one in the
// range, which the engine lists (timeseries.DB.SeriesFields) from each series'
// newest row where it can, without reading samples.
func (qr *Querier) fieldLabelSets(ctx context.Context, timeField, metaField string, start, end int64, ms []*labels.Matcher) ([]labels.Labels, error) {
	filter, numeric, err := qr.fieldsRead(timeField, metaField, start, end, ms)
	if err != nil || len(numeric) == 0 {
		return nil, err
	}
	all, err := qr.q.svc.SeriesFields(ctx, qr.q.collection, filter, numeric)
	if err != nil {
		return nil, err
	}
	var out []labels.Labels
	for _, s := range all {
		base := fieldBaseOf(s.Key, metaField, qr.q.collection)
		for _, f := range s.Fields {
			ls := base.labels(f)
			if !matchAll(ms, ls) {
				continue
			}
			if err := qr.charge(0, seriesBytes+int64(ls.ByteSize())); err != nil {
				return nil, err
			}
			out = append(out, ls)
		}
	}
	slices.SortFunc(out, labels.Compare)
	return slices.CompactFunc(out, labels.Equal), nil
}

// fieldsFilter is the filter of a read of [start, end] of a fields-shaped
// collection, and the fields that can make a series the matchers match
// (nil for all; see fieldsPushdown).
func fieldsFilter(timeField, metaField string, start, end int64, ms []*labels.Matcher) (*partialfilter.Filter, []string, error) {
	cond := map[string]any{timeField: map[string]any{"$gte": timeOf(start), "$lte": timeOf(end)}}
	meta, fields := fieldsPushdown(metaField, ms)
	for k, v := range meta {
		cond[k] = v
	}
	filter, err := partialfilter.Parse(cond)
	return filter, fields, err
}

// fieldsPushdown returns what of the matchers a read of a fields-shaped
// collection can ask of the engine: for a label equal to a string that
// cannot be the text of a number or a boolean (only a string meta value
// gives such a label text), or matching a regex that is a set of such
// strings (site=~"a|b"), the condition that the meta document holds it
// (one of them); for a name equal to a value, the fields that can make
// it (its parts after each "_": the name is <measurement or
// collection>_<field>), nil for all. The matchers are still checked on
// every series read.
func fieldsPushdown(metaField string, ms []*labels.Matcher) (meta map[string]any, fields []string) {
	meta = map[string]any{}
	for _, m := range ms {
		switch {
		case m.Name == labels.MetricName:
			if m.Type != labels.MatchEqual {
				continue
			}
			fields = []string{}
			for i := 0; i < len(m.Value); i++ {
				if m.Value[i] == '_' && i+1 < len(m.Value) {
					fields = append(fields, m.Value[i+1:])
				}
			}
			if len(fields) == 0 {
				fields = []string{m.Value} // matches no field: nothing is read
			}
		case m.Name == metaField || m.Name == measurementLabel || strings.ContainsAny(m.Name, ".$\x00"):
		case m.Type == labels.MatchEqual:
			if onlyString(m.Value) {
				meta[metaField+"."+m.Name] = m.Value
			}
		case m.Type == labels.MatchRegexp:
			set := m.SetMatches()
			if len(set) == 0 || slices.ContainsFunc(set, func(v string) bool { return !onlyString(v) }) {
				continue
			}
			in := make([]any, len(set))
			for i, v := range set {
				in[i] = v
			}
			meta[metaField+"."+m.Name] = map[string]any{"$in": in}
		}
	}
	return meta, fields
}

// onlyString reports whether only a string meta value gives the label
// text v: it is not empty (a missing label's) nor the text of a boolean
// or a number.
func onlyString(v string) bool {
	if v == "" || v == "true" || v == "false" {
		return false
	}
	_, err := strconv.ParseFloat(v, 64)
	return err != nil
}

// fieldBase is what the series of one meta value share: the prefix of
// their names and their labels but the name.
type fieldBase struct {
	prefix string
	pairs  []labels.Label
}

// labels returns the labels of the series of field f.
func (b fieldBase) labels(f string) labels.Labels {
	sb := labels.NewScratchBuilder(len(b.pairs) + 1)
	sb.Add(labels.MetricName, b.prefix+"_"+f)
	for _, l := range b.pairs {
		sb.Add(l.Name, l.Value)
	}
	sb.Sort()
	return sb.Labels()
}

// fieldBaseOf reads a meta key: a document gives its fields of string,
// number or boolean values as labels, its _measurement (a line's) as the
// prefix; a string, number or boolean gives the label named metaField; no
// meta value gives no label. The prefix is otherwise the collection's
// name.
func fieldBaseOf(key, metaField, collection string) fieldBase {
	b := fieldBase{prefix: collection}
	if metaLabelTexts(key, func(name, text string) {
		switch name {
		case labels.MetricName:
		case measurementLabel:
			b.prefix = text
		default:
			b.pairs = append(b.pairs, labels.Label{Name: name, Value: text})
		}
	}) {
		return b
	}
	d := json.NewDecoder(strings.NewReader(key))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return b
	}
	if text, ok := labelText(v); ok && text != "" {
		b.pairs = append(b.pairs, labels.Label{Name: metaField, Value: text})
	}
	return b
}

// labelText is the text of a label's value: a string, a number or a
// boolean; anything else is no label.
func labelText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
