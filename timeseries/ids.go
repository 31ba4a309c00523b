package timeseries

import (
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
)

// AssignIDs gives every measurement of ms without an _id field a new
// ObjectId, made at now, as its last field: MongoDB's drivers make one
// for every document they insert, and Hourglass makes one where the
// writer did not (HTTP, line protocol). The ids of one call are
// consecutive (document.ReserveObjectIDs), so that a series' ids, stored
// as a column, take a few bits each. The command layer calls it before a
// batch reaches the engine or a replica set's log (and a replica set's
// Node.Insert before it replicates one), so that every member stores the
// same ids; DB.Insert stores what it is given.
func AssignIDs(ms []model.Measurement, now time.Time) {
	n := 0
	for i := range ms {
		if !hasID(ms[i].Fields) {
			n++
		}
	}
	if n == 0 {
		return
	}
	first := document.ReserveObjectIDs(now, n)
	arena := make([]byte, 12*n)
	c := uint32(first[9])<<16 | uint32(first[10])<<8 | uint32(first[11])
	for k := range n {
		id := arena[12*k : 12*k+12]
		copy(id, first[:9])
		ck := c + uint32(k)
		id[9], id[10], id[11] = byte(ck>>16), byte(ck>>8), byte(ck)
	}
	all := string(arena) // the ids share one allocation
	k := 0
	for i := range ms {
		m := &ms[i]
		if hasID(m.Fields) {
			continue
		}
		m.Fields = append(m.Fields, model.Field{Name: "_id", Value: model.Value{Kind: model.KindObjectID, S: all[12*k : 12*k+12]}})
		k++
	}
}

func hasID(fs []model.Field) bool {
	for i := range fs {
		if len(fs[i].Name) == 3 && fs[i].Name == "_id" {
			return true
		}
	}
	return false
}
