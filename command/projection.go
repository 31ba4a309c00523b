package command

import (
	"encoding/json"
	"strings"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Projection is the projection of a find on a time-series collection:
// the columns the find returns (timeseries.FindOptions). Every door reads
// its clients' projection into one, so that one projection selects the
// same columns through each.
//
// A projection names top-level fields only, all included or all excluded;
// _id, which measurements do not carry, may be excluded (or included) in
// either and is otherwise ignored:
//
//	p, err := command.ParseProjection(map[string]any{"temp": 1, "timestamp": true})
//	if err != nil {
//		return err // a *mongoerr.Error, BadValue
//	}
//	opts := timeseries.FindOptions{Filter: f}
//	p.Apply(&opts, info.Options.TimeSeries, fields)
//
// The zero Projection projects nothing: every column is returned.
type Projection struct {
	fields    map[string]bool // field -> included; _id left out
	inclusion bool
	// id is the projection of _id, which MongoDB returns unless it is
	// excluded, whether the others are included or excluded.
	id idProjection
}

type idProjection uint8

const (
	idDefault idProjection = iota
	idIncluded
	idExcluded
)

// ParseProjection reads a projection whose values are booleans or numbers (0 is an
// exclusion, any other number an inclusion), as decoded from JSON
// (json.Number, float64) or BSON (int32, int64, float64). It refuses, with
// a *mongoerr.Error of code BadValue naming the field, any other value, a
// dotted or $-prefixed field and a mix of inclusions and exclusions. m is
// not retained.
func ParseProjection(m map[string]any) (Projection, error) {
	var s Projection
	var excl bool
	for f, v := range m {
		on, ok := truth(v)
		if !ok {
			return Projection{}, mongoerr.New(mongoerr.BadValue, "'projection.%s' must be 0, 1, true or false", f)
		}
		if strings.Contains(f, ".") || strings.HasPrefix(f, "$") {
			return Projection{}, mongoerr.New(mongoerr.BadValue, "projection of %q is not supported: project top-level fields only", f)
		}
		if f == "_id" {
			s.id = idIncluded
			if !on {
				s.id = idExcluded
			}
			continue
		}
		if on {
			s.inclusion = true
		} else {
			excl = true
		}
		if s.inclusion && excl {
			return Projection{}, mongoerr.New(mongoerr.BadValue, "a projection cannot mix inclusion and exclusion (at %q)", f)
		}
		if s.fields == nil {
			s.fields = make(map[string]bool, len(m))
		}
		s.fields[f] = on
	}
	return s, nil
}

// truth reads a projection value.
func truth(v any) (on, ok bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f != 0, err == nil
	case float64:
		return x != 0, true
	case int64:
		return x != 0, true
	case int32:
		return x != 0, true
	case int:
		return x != 0, true
	}
	return false, false
}

// Apply sets the columns of opts that s selects in a collection with the
// time-series options ts: OmitTime, OmitMeta and Fields, in the order of
// fields, the collection's measurement fields in the order a find returns
// them (timeseries.Collection.FieldNames). A zero Projection leaves opts
// as it is.
func (s Projection) Apply(opts *timeseries.FindOptions, ts *model.TimeSeriesOptions, fields []string) {
	if len(s.fields) == 0 && s.id != idExcluded {
		return
	}
	opts.Fields = []string{}
	if s.inclusion {
		opts.OmitTime = !s.fields[ts.TimeField]
		opts.OmitMeta = ts.MetaField == "" || !s.fields[ts.MetaField]
		for _, f := range fields {
			if s.fields[f] || (f == "_id" && s.id != idExcluded) {
				opts.Fields = append(opts.Fields, f)
			}
		}
		return
	}
	_, opts.OmitTime = s.fields[ts.TimeField]
	_, opts.OmitMeta = s.fields[ts.MetaField]
	for _, f := range fields {
		if _, out := s.fields[f]; !out && !(f == "_id" && s.id == idExcluded) {
			opts.Fields = append(opts.Fields, f)
		}
	}
}
