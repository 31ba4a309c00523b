package pipeline

import (
	"slices"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// sortingIter reads its whole input and yields it sorted by partition,
// then sortBy; documents that tie keep their input order. It holds max
// bytes of documents; past them it spills sorted runs to disk when
// allowed (spill), and fails with 292 otherwise.
type sortingIter struct {
	in     Iterator
	order  order
	max    int64
	spill  *spillOptions // nil: no spilling
	sorted []Doc
	read   bool
	merge  *runMerge // the runs spilled and the last one in memory
}

func (s *sortingIter) Next() (Doc, error) {
	if !s.read {
		if err := s.fill(); err != nil {
			return nil, err
		}
		s.read = true
	}
	if s.merge != nil {
		return s.merge.next()
	}
	if len(s.sorted) == 0 {
		return nil, nil
	}
	d := s.sorted[0]
	s.sorted[0] = nil
	s.sorted = s.sorted[1:]
	return d, nil
}

func (s *sortingIter) fill() error {
	var mem int64
	var runs []*run
	fail := func(err error) error {
		s.sorted = nil
		closeRuns(runs)
		return err
	}
	for {
		d, err := s.in.Next()
		if err != nil {
			return fail(err)
		}
		if d == nil {
			break
		}
		if mem += Size(d); mem > s.max {
			if s.spill == nil {
				return fail(mongoerr.New(codeSortMemory, "Sort exceeded memory limit of %d bytes, but did not opt in to external sorting", s.max))
			}
			slices.SortStableFunc(s.sorted, s.order.compare)
			r, err := writeRun(s.spill, s.sorted)
			if err != nil {
				return fail(err)
			}
			if runs = append(runs, r); len(runs) >= maxOpenRuns {
				// Bound the open files: merge the runs into one.
				if r, err = mergeRuns(s.spill, runs, s.order); err != nil {
					return fail(err)
				}
				runs = []*run{r}
			}
			clear(s.sorted)
			s.sorted, mem = s.sorted[:0], Size(d)
		}
		s.sorted = append(s.sorted, d)
	}
	slices.SortStableFunc(s.sorted, s.order.compare)
	if runs != nil {
		s.merge = newRunMerge(runs, s.sorted, s.order)
		s.sorted = nil
	}
	return nil
}

// order is a stage's order: by partition (the values of paths), then
// sortBy.
type order struct {
	parts  []string
	sortBy []SortKey
}

func (spec *WindowSpec) order() order {
	o := order{sortBy: spec.SortBy}
	if spec.PartitionBy != "" {
		o.parts = []string{spec.PartitionBy}
	}
	return o
}

// compare orders two documents by partition, then sortBy.
func (spec *WindowSpec) compare(a, b Doc) int { return spec.order().compare(a, b) }

// samePartition tells whether two documents are of one partition.
func (o order) samePartition(a, b Doc) bool {
	for _, p := range o.parts {
		pa, _ := Lookup(a, p)
		pb, _ := Lookup(b, p)
		if partialfilter.Compare(pa, pb) != 0 {
			return false
		}
	}
	return true
}

func (o order) compare(a, b Doc) int {
	for _, p := range o.parts {
		pa, _ := Lookup(a, p)
		pb, _ := Lookup(b, p)
		if c := partialfilter.Compare(pa, pb); c != 0 {
			return c
		}
	}
	for _, k := range o.sortBy {
		va, _ := Lookup(a, k.Field)
		vb, _ := Lookup(b, k.Field)
		c := partialfilter.Compare(va, vb)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
