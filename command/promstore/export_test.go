package promstore

// FullReads makes every Select of q (a *Queryable or an *AllQueryable)
// read its whole range, also where the query needs only the last
// samples: the reads the fast paths must answer as.
func FullReads(q any) {
	switch q := q.(type) {
	case *Queryable:
		q.fullReads = true
	case *AllQueryable:
		q.fullReads = true
	}
}
