package timeseries

// metaInterner shares, within a collection, the parts of series' meta
// values that many series repeat: sub-document field names, and the
// string values of fields that take few distinct values (a site, a
// kind). A fleet's series differ in a sensor id or two; the rest of each
// decoded meta value would otherwise be allocated once per series. It is
// guarded by DB.mu (held for writing) and bounded: it keeps at most
// maxInternNames names and, per field, maxInternValues values; a field
// seen with more distinct values stops being interned (its values are
// unique per series, so sharing them saves nothing).
type metaInterner struct {
	names map[string]string
	// values holds, per field name, the boxed string values seen; nil
	// for a field that took more than maxInternValues of them.
	values map[string]map[string]any
}

const (
	// maxInternNames bounds the field names interned: meta values share a
	// schema in practice, so a few dozen names is the usual count.
	maxInternNames = 1024
	// maxInternValues is the most distinct values a field may take and
	// still be interned: sites, kinds and regions, not sensor ids.
	maxInternValues = 256
	// maxInternLen is the longest string value interned.
	maxInternLen = 64
)

// compact returns v with the maps of its sub-documents made to their size,
// their names interned and the low-cardinality strings among their values
// shared. v is not changed; the result holds the same value.
func (in *metaInterner) compact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if s, ok := e.(string); ok {
				out[in.name(k)] = in.value(k, s)
			} else {
				out[in.name(k)] = in.compact(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = in.compact(e)
		}
		return out
	}
	return v
}

func (in *metaInterner) name(k string) string {
	if n, ok := in.names[k]; ok {
		return n
	}
	if in.names == nil {
		in.names = make(map[string]string)
	}
	if len(in.names) < maxInternNames {
		in.names[k] = k
	}
	return k
}

// value returns s boxed, shared with the other series whose field name
// holds s when name takes few distinct values.
func (in *metaInterner) value(name, s string) any {
	vs, seen := in.values[name]
	if seen && vs == nil || len(s) > maxInternLen {
		return s // high cardinality
	}
	if v, ok := vs[s]; ok {
		return v
	}
	if in.values == nil {
		in.values = make(map[string]map[string]any)
	}
	if !seen {
		if len(in.values) >= maxInternNames {
			return s
		}
		vs = make(map[string]any)
		in.values[in.name(name)] = vs
	}
	if len(vs) >= maxInternValues {
		in.values[in.name(name)] = nil // stop: the table is dropped
		return s
	}
	v := any(s)
	vs[s] = v
	return v
}
