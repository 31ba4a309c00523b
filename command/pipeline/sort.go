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
	spec   *WindowSpec
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
	slices.SortStableFunc(s.sorted, s.spec.compare)
	return nil
}

// compare orders two documents by partition, then sortBy.
func (spec *WindowSpec) compare(a, b Doc) int {
	if spec.PartitionBy != "" {
		pa, _ := Lookup(a, spec.PartitionBy)
		pb, _ := Lookup(b, spec.PartitionBy)
		if c := partialfilter.Compare(pa, pb); c != 0 {
			return c
		}
	}
	for _, k := range spec.SortBy {
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
