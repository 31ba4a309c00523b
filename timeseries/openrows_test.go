package timeseries

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// randomOpenFields returns the fields of a random measurement: of the
// names given, each set or not, of a kind fixed by its name, values
// covering every kind's edges.
func randomOpenFields(rng *rand.Rand, names []string) []model.Field {
	var fs []model.Field
	for i, n := range names {
		if rng.IntN(4) == 0 {
			continue
		}
		var v model.Value
		switch i % 7 {
		case 0:
			v = model.Float([]float64{0, -0.0, 1.5, math.Inf(-1), math.NaN(), math.MaxFloat64, rng.Float64()}[rng.IntN(7)])
		case 1:
			v = model.Int([]int64{0, -1, math.MinInt64, math.MaxInt64, rng.Int64()}[rng.IntN(5)])
		case 2:
			v = model.Value{Kind: model.KindString, S: string(make([]byte, rng.IntN(300)))}
		case 3:
			v = model.Value{Kind: model.KindBool, B: rng.IntN(2) == 0}
		case 4:
			id := make([]byte, bucket.ObjectIDLen)
			for j := range id {
				id[j] = byte(rng.IntN(256))
			}
			v = model.Value{Kind: model.KindObjectID, S: string(id)}
		case 5:
			v = model.Value{Kind: model.KindDate, I: rng.Int64N(1 << 50)}
		case 6:
			v = model.Value{Kind: model.KindInt32, I: int64(int32(rng.Uint32()))}
		}
		fs = append(fs, model.Field{Name: n, Value: v})
	}
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	return fs
}

// TestOpenRowsAsPlain: a bucket taking open rows holds what one taking
// plain rows holds, row for row (times out of order, absent fields,
// columns added midway, every kind, values at their edges), before and
// after its freezes, as a capture, a capture of its times and its columns
// present; its bounds, order and newest numbers are the same too.
func TestOpenRowsAsPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	all := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	var fz freezeScratch
	for round := range 300 {
		open, plain := &memBucket{span: int64(time.Hour)}, &memBucket{span: int64(time.Hour)}
		c := &collection{}
		names := all[:1+rng.IntN(3)]
		for i := range 1 + rng.IntN(80) {
			if rng.IntN(10) == 0 && len(names) < len(all) {
				names = all[:len(names)+1] // a column added midway
			}
			fs := randomOpenFields(rng, names)
			tm := int64(rng.IntN(1000)) * 1e6
			if open.typeChange(fs) != plain.typeChange(fs) {
				t.Fatalf("round %d row %d: type change %v open, %v plain", round, i, open.typeChange(fs), plain.typeChange(fs))
			}
			open.appendRow(tm, 1, fs, c, true)
			plain.appendRow(tm, 1, fs, c, false)
			if open.openRows == 0 || len(open.cols.Times) != 0 {
				t.Fatalf("round %d row %d: %d open rows, %d plain: want the row open", round, i, open.openRows, len(open.cols.Times))
			}
			if rng.IntN(16) == 0 {
				open.freeze(&fz)
				plain.freeze(&fz)
			}
			if rng.IntN(8) != 0 {
				continue
			}
			got, want := open.capture(), plain.capture()
			if !reflect.DeepEqual(normalCols(got.cols), normalCols(want.cols)) {
				t.Fatalf("round %d row %d: open rows captured\n%+v\nplain\n%+v", round, i, got.cols, want.cols)
			}
			if !got.thawed {
				t.Fatalf("round %d row %d: a capture of open rows is new columns: want thawed", round, i)
			}
			if gt, wt := open.captureTimes(), plain.captureTimes(); !reflect.DeepEqual(append([]int64{}, gt...), append([]int64{}, wt...)) {
				t.Fatalf("round %d row %d: times %v, want %v", round, i, gt, wt)
			}
			if gp, wp := open.presentColumns(), plain.presentColumns(); !reflect.DeepEqual(gp, wp) {
				t.Fatalf("round %d row %d: columns present %v, want %v", round, i, gp, wp)
			}
			if lo, hi := slices.Min(got.cols.Times), slices.Max(got.cols.Times); open.minT != lo || open.maxT != hi {
				t.Fatalf("round %d row %d: bounds [%d, %d], times from %d to %d", round, i, open.minT, open.maxT, lo, hi)
			}
			if open.unordered == slices.IsSorted(got.cols.Times) {
				t.Fatalf("round %d row %d: unordered %v, times %v", round, i, open.unordered, got.cols.Times)
			}
			if num, over := lastNumbers(&got.cols, open.maxT); num != open.lastNum || over != open.lastOver {
				t.Fatalf("round %d row %d: newest numbers %b, want %b", round, i, open.lastNum, num)
			}
			if open.minT != plain.minT || open.maxT != plain.maxT || open.unordered != plain.unordered ||
				open.lastNum != plain.lastNum || open.lastOver != plain.lastOver || open.rows() != plain.rows() || open.size != plain.size {
				t.Fatalf("round %d row %d: open %+v\nplain %+v", round, i, open, plain)
			}
		}
	}
}

// normalCols returns cols with empty slices nil and every presence bitmap
// of all rows present nil, so that equal rows compare equal.
func normalCols(cols bucket.Columns) bucket.Columns {
	out := bucket.Columns{Times: cols.Times}
	if len(out.Times) == 0 {
		out.Times = nil
	}
	for _, c := range cols.Fields {
		n := len(cols.Times)
		if c.Present != nil {
			all := true
			for r := range n {
				all = all && c.IsPresent(r)
			}
			if all {
				c.Present = nil
			} else {
				c.Present = append([]uint64(nil), c.Present[:(n+63)/64]...)
				if r := n % 64; r != 0 {
					c.Present[len(c.Present)-1] &= 1<<r - 1
				}
			}
		}
		if len(c.Floats) == 0 {
			c.Floats = nil
		}
		if len(c.Ints) == 0 {
			c.Ints = nil
		}
		if len(c.Strings) == 0 {
			c.Strings = nil
		}
		if len(c.IDs) == 0 {
			c.IDs = nil
		}
		if len(c.Bools) == 0 {
			c.Bools = nil
		}
		// NaN != NaN: floats compare by their bits.
		if c.Floats != nil {
			c.Ints = make([]int64, len(c.Floats))
			for i, f := range c.Floats {
				c.Ints[i] = int64(math.Float64bits(f))
			}
			c.Floats = nil
		}
		out.Fields = append(out.Fields, c)
	}
	return out
}

// TestOpenRowsShareHeaders: buckets of one collection taking open rows of
// the same fields share one column list, which a column added to one of
// them leaves as it was; the buckets count no memory for a list shared.
func TestOpenRowsShareHeaders(t *testing.T) {
	c := &collection{}
	fs := []model.Field{{Name: "v", Value: model.Float(1)}, {Name: "n", Value: model.Int(2)}}
	a, b := &memBucket{span: int64(time.Hour)}, &memBucket{span: int64(time.Hour)}
	a.appendRow(1, 1, fs, c, true)
	b.appendRow(2, 1, fs, c, true)
	if !a.hdrShared || !b.hdrShared || &a.cols.Fields[0] != &b.cols.Fields[0] {
		t.Fatalf("two buckets of the same fields: shared %v, %v, lists at %p and %p: want one list", a.hdrShared, b.hdrShared, &a.cols.Fields[0], &b.cols.Fields[0])
	}
	if got, want := a.mem, memBucketMem+int64(cap(a.open)); got != want {
		t.Errorf("a bucket's memory %d, want %d (its struct and open rows)", got, want)
	}
	shared := a.cols.Fields
	b.appendRow(3, 1, append(fs, model.Field{Name: "w", Value: model.Int(3)}), c, true)
	if len(shared) != 2 || len(a.cols.Fields) != 2 || shared[0].Name != "v" || shared[1].Name != "n" {
		t.Fatalf("a column added to b changed a's list: %+v", a.cols.Fields)
	}
	if len(b.cols.Fields) != 3 || !b.hdrShared || &b.cols.Fields[0] == &shared[0] {
		t.Fatalf("b after a column added: %d columns, shared %v, same list %v", len(b.cols.Fields), b.hdrShared, &b.cols.Fields[0] == &shared[0])
	}
	for i := range c.headers {
		if hdr := c.headers[i]; cap(hdr) != len(hdr) {
			t.Fatalf("a shared list with room past its length (%d of %d): an append would write into it", len(hdr), cap(hdr))
		}
	}
	// A field named twice (which an insert refuses before) keeps its
	// last value in one column.
	d := &memBucket{span: int64(time.Hour)}
	d.appendRow(1, 1, []model.Field{{Name: "x", Value: model.Int(1)}, {Name: "x", Value: model.Int(2)}}, c, true)
	if got := d.capture().cols; len(got.Fields) != 1 || len(got.Fields[0].Ints) != 1 || got.Fields[0].Ints[0] != 2 {
		t.Fatalf("a field named twice: %+v", got)
	}
	// Past maxHeaderSets lists, a bucket keeps its own, counted.
	for i := range maxHeaderSets + 1 {
		x := &memBucket{span: int64(time.Hour)}
		x.appendRow(1, 1, []model.Field{{Name: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Value: model.Int(1)}}, c, true)
		if i == maxHeaderSets {
			if x.hdrShared || x.mem != memBucketMem+int64(cap(x.open))+columnHeaderMem {
				t.Fatalf("list %d: shared %v, memory %d", i, x.hdrShared, x.mem)
			}
		}
	}
}

// TestOpenRowsCharged: a read that takes a bucket's open rows decoded
// (all its rows newer than its frozen ones, or with the frozen ones
// decoded later, out of DB.mu) is charged their values, which it holds
// alone, not only their columns' headers.
func TestOpenRowsCharged(t *testing.T) {
	c := &collection{}
	b := &memBucket{span: int64(time.Hour)}
	var fz freezeScratch
	for i := range 40 {
		b.appendRow(int64(i), 1, []model.Field{{Name: "v", Value: model.Float(float64(i))}, {Name: "n", Value: model.Int(int64(i))}}, c, true)
		if i == 31 {
			b.freeze(&fz)
		}
	}
	tail := b.captureTail()
	values := columnsBytes(&tail)
	// Every row since the freeze is newer than the frozen ones.
	cols, thawed, later := captureFor(&scanPlan{}, b, b.frozenMaxT+1)
	if later != nil || len(cols.Times) != 8 {
		t.Fatalf("a read of the rows after the frozen ones: %d rows, later %v", len(cols.Times), later)
	}
	if got := capturedBytes(&cols, thawed); got != values {
		t.Errorf("charged %d bytes for the open rows decoded, want %d", got, values)
	}
	// The frozen rows decoded later: the open rows are charged now.
	_, _, later = captureFor(&scanPlan{lazyThaw: true, fields: []string{"v"}}, b, 0)
	if later == nil || !later.tailDecoded {
		t.Fatalf("a lazy read: %+v, want the open rows decoded", later)
	}
	if got := later.bytes(); got < values+8*40 {
		t.Errorf("a lazy read charged %d bytes, want at least the open rows' %d and the times", got, values+8*40)
	}
}
