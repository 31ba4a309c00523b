package timeseries

import (
	"context"
	"slices"

	"github.com/hourglassdb/hourglass/partialfilter"
)

// EarliestLast returns the earliest, over every series of collection
// name and every field of fields, of the time (nanoseconds) of the
// series' last row that the filter selects and that holds a number in the
// field; ok is false when no such row exists. Fields nil means every
// field that holds only numbers; a field that holds other values fails
// with TypeMismatch, as in an aggregate.
//
// Every series' rows that the filter selects from that time on hold the
// last value of each of its fields: a reader that needs only the last
// value of each series (Prometheus' last_over_time) reads those rows, not
// the whole range. It is the aggregate of func last over the whole range
// by series, and decodes, as that does, about one bucket a series: the
// newest of each, older ones passed over by their time bounds once each
// field has a last value (a field the collection never held is not
// asked for: it would have a series' every bucket read).
func (db *DB) EarliestLast(ctx context.Context, name string, filter *partialfilter.Filter, fields []string) (t int64, ok bool, err error) {
	c, err := db.lookup(name)
	if err != nil {
		return 0, false, err
	}
	if fields != nil {
		held := make([]string, 0, len(fields))
		db.mu.RLock()
		for _, f := range fields {
			if _, ok := c.fieldTypes[f]; ok && !slices.Contains(held, f) {
				held = append(held, f)
			}
		}
		db.mu.RUnlock()
		if len(held) == 0 {
			return 0, false, nil
		}
		fields = held
	}
	opts := AggregateOptions{Filter: filter, WholeRange: true, Fields: fields, Funcs: []AggFunc{AggLast}, exactGroups: true}
	win, err := aggWindowing(&opts)
	if err != nil {
		return 0, false, err
	}
	guard, end, err := db.startQuery(ctx)
	if err != nil {
		return 0, false, err
	}
	defer end()
	a, err := db.aggregate(ctx, c, name, opts, opts.Funcs, win, guard)
	if err != nil {
		return 0, false, err
	}
	for _, row := range a.cells.rows {
		for _, cell := range row {
			if cell.count > 0 && (!ok || cell.lastT < t) {
				t, ok = cell.lastT, true
			}
		}
	}
	return t, ok, nil
}
