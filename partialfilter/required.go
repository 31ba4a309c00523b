package partialfilter

// RequiredStrings returns, for the top-level conjuncts that are an
// equality with a string ({"a.b": "x"}, {"a.b": {"$eq": "x"}}) or an $in
// of strings only (no regex), their strings: one group a conjunct. Every
// document the filter matches holds, for each group, one of its strings
// as a string value somewhere (at the path, or in an array there). It is
// a necessary condition, cheap to test on an encoded document before
// decoding it; nil when the filter has no such conjunct.
func (f *Filter) RequiredStrings() [][]string {
	if f.IsEmpty() {
		return nil
	}
	var out [][]string
	for _, n := range f.root.conjuncts(nil) {
		switch n.op {
		case opEq:
			if s, ok := n.val.(string); ok {
				out = append(out, []string{s})
			}
		case opIn:
			if n.res != nil || len(n.list) == 0 {
				continue
			}
			group := make([]string, 0, len(n.list))
			for _, v := range n.list {
				s, ok := v.(string)
				if !ok {
					group = nil
					break
				}
				group = append(group, s)
			}
			if group != nil {
				out = append(out, group)
			}
		}
	}
	return out
}
