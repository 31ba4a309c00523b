package pipeline

import (
	"slices"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// sortingIter reads its whole input, within max bytes, and yields it
// sorted by partition, then sortBy; documents that tie keep their input
// order.
type sortingIter struct {
	in     Iterator
	order  order
	max    int64
	sorted []Doc
	read   bool
}

func (s *sortingIter) Next() (Doc, error) {
	if !s.read {
		if err := s.fill(); err != nil {
			return nil, err
		}
		s.read = true
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
	for {
		d, err := s.in.Next()
		if err != nil {
			return err
		}
		if d == nil {
			break
		}
		if mem += Size(d); mem > s.max {
			s.sorted = nil
			return mongoerr.New(codeSortMemory, "Sort exceeded memory limit of %d bytes, but did not opt in to external sorting", s.max)
		}
		s.sorted = append(s.sorted, d)
	}
	slices.SortStableFunc(s.sorted, s.order.compare)
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
