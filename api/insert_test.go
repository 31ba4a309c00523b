package api

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestMergeWriteErrors checks the one reply both kinds of insert give: the
// conversion's refusals and the storage's in document order, and only the
// first for an ordered insert, whichever of the two refused it.
func TestMergeWriteErrors(t *testing.T) {
	conv := func(i int) writeErrorReply {
		return writeErrorOf(i, mongoerr.New(mongoerr.BadValue, "bad"))
	}
	dup := errors.New("dup")
	for _, c := range []struct {
		name      string
		converted []writeErrorReply // refusals of the conversion
		idx       []int             // document index of each value stored
		ordered   bool
		res       timeseries.InsertResult
		want      []int // the indexes of the write errors replied
	}{
		{"unordered, both kinds interleaved", []writeErrorReply{conv(1), conv(4)}, []int{0, 2, 3, 5}, false,
			timeseries.InsertResult{Inserted: 2, Errors: []timeseries.WriteError{{Index: 0, Err: dup}, {Index: 2, Err: dup}}},
			[]int{0, 1, 3, 4}},
		{"ordered, the storage refused before the conversion did", []writeErrorReply{conv(3)}, []int{0, 1, 2}, true,
			timeseries.InsertResult{Inserted: 1, Errors: []timeseries.WriteError{{Index: 1, Err: dup}}},
			[]int{1}},
		{"ordered, only the conversion refused", []writeErrorReply{conv(2)}, []int{0, 1}, true,
			timeseries.InsertResult{Inserted: 2},
			[]int{2}},
		{"ordered, only the storage refused", nil, []int{0, 1, 2}, true,
			timeseries.InsertResult{Inserted: 0, Errors: []timeseries.WriteError{{Index: 0, Err: dup}}},
			[]int{0}},
		{"nothing refused", nil, []int{0, 1}, true, timeseries.InsertResult{Inserted: 2}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			reply := insertReply{WriteErrors: c.converted}
			mergeWriteErrors(&reply, c.idx, c.ordered, c.res)
			var got []int
			for _, we := range reply.WriteErrors {
				got = append(got, we.Index)
			}
			if !reflect.DeepEqual(got, c.want) || reply.Inserted != c.res.Inserted {
				t.Fatalf("write errors at %v, inserted %d; want %v, %d", got, reply.Inserted, c.want, c.res.Inserted)
			}
		})
	}
}
