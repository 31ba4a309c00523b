package command

import (
	"testing"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestWindowInputOrder checks when aggregate reads a window stage's input
// in the stage's order (streaming it, holding only the window) and when
// the stage sorts it.
func TestWindowInputOrder(t *testing.T) {
	ts := timeseries.CollectionInfo{Options: timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "ts", MetaField: "m"}}}
	plain := timeseries.CollectionInfo{}
	asc := []pipeline.SortKey{{Field: "ts"}}
	desc := []pipeline.SortKey{{Field: "ts", Desc: true}}
	for _, c := range []struct {
		info      timeseries.CollectionInfo
		part      string
		sortBy    []pipeline.SortKey
		a         Find
		sorted    bool
		wantSorts int // the find's sort keys after
	}{
		{ts, "m", asc, Find{}, true, 0},         // by series
		{ts, "m", asc, Find{Limit: 5}, true, 0}, // by series, the first 5
		{ts, "m", desc, Find{}, false, 0},       // series are ascending
		{ts, "m.id", asc, Find{}, false, 0},     // a sub-field: series of one id apart
		{ts, "", asc, Find{}, true, 1},          // by time
		{ts, "", desc, Find{}, true, 1},         // by time, descending
		{ts, "", asc, Find{Skip: 1}, false, 0},  // a sort would change what is skipped
		{ts, "", asc, Find{Sort: []timeseries.SortKey{{Field: "ts"}}}, true, 1},
		{ts, "m", asc, Find{Sort: []timeseries.SortKey{{Field: "ts"}}}, false, 1},
		{plain, "", []pipeline.SortKey{{Field: "x"}}, Find{}, false, 0},
		{plain, "p", []pipeline.SortKey{{Field: "x"}}, Find{}, false, 0},
		{plain, "", nil, Find{}, true, 0},
	} {
		a := c.a
		var parts []string
		if c.part != "" {
			parts = []string{c.part}
		}
		if got := orderFind(c.info, parts, c.sortBy, &a); got != c.sorted || len(a.Sort) != c.wantSorts {
			t.Errorf("partition %q sortBy %v find %+v: sorted %v sort %v, want %v and %d keys", c.part, c.sortBy, c.a, got, a.Sort, c.sorted, c.wantSorts)
		}
	}
}
