package timeseries

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// TestSortedColumnsInto: sorting into reused columns gives what sorting
// into new ones gives, bucket after bucket of other sizes, columns and
// types (a dense float column, a sparse int one, a string one, one with
// no row left), and the columns themselves when they are in order.
func TestSortedColumnsInto(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	mk := func(n int, kinds ...model.Kind) bucket.Columns {
		var c bucket.Columns
		for range n {
			c.Times = append(c.Times, int64(rng.Intn(n/2+1))) // duplicates: the sort is stable
		}
		for k, kind := range kinds {
			col := bucket.Column{Name: string(rune('a' + k)), Type: kind}
			if k%2 == 1 {
				col.Present = make([]uint64, (n+63)/64)
			}
			for i := range n {
				if col.Present != nil && rng.Intn(3) == 0 {
					col.Present[i/64] |= 1 << (i % 64)
				}
				switch kind {
				case model.KindFloat:
					col.Floats = append(col.Floats, rng.Float64())
				case model.KindInt:
					col.Ints = append(col.Ints, rng.Int63())
				case model.KindString:
					col.Strings = append(col.Strings, string(rune('a'+rng.Intn(26))))
				}
			}
			c.Fields = append(c.Fields, col)
		}
		return c
	}
	var dst bucket.Columns
	var perm []int32
	for _, c := range []bucket.Columns{
		mk(300, model.KindFloat, model.KindInt, model.KindString),
		mk(70, model.KindInt, model.KindFloat),
		mk(500, model.KindFloat, model.KindInt, model.KindFloat, model.KindInt),
		mk(3, model.KindString, model.KindInt), // the int column may keep no row
		mk(129, model.KindFloat),
	} {
		want := sortedColumns(&c)
		got := sortedColumnsInto(&dst, &c, &perm)
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%d rows: sorted into reused columns differ from new ones:\n%+v\n%+v", len(c.Times), *got, want)
		}
		for i := 1; i < len(got.Times); i++ {
			if got.Times[i] < got.Times[i-1] {
				t.Fatalf("%d rows: not in time order at %d", len(c.Times), i)
			}
		}
	}
	// Numbers and presence sorted again into the same columns allocate
	// nothing: what a checkpoint's encoder does bucket after bucket.
	c := mk(400, model.KindFloat, model.KindInt, model.KindFloat)
	sortedColumnsInto(&dst, &c, &perm)
	if n := testing.AllocsPerRun(10, func() { sortedColumnsInto(&dst, &c, &perm) }); n != 0 {
		t.Errorf("%v allocations sorting into reused columns, want 0", n)
	}
	in := bucket.Columns{Times: []int64{1, 2, 3}}
	if got := sortedColumnsInto(&dst, &in, &perm); got != &in {
		t.Error("columns in order: not returned themselves")
	}
}
