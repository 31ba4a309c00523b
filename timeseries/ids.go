package timeseries

import (
	"encoding/binary"

	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/model"
)

// idField is the name of a measurement's identity.
const idField = "_id"

// madeID returns the ObjectId of a measurement written without an _id:
// made of what identifies it, so that it is the same on every read and on
// every member of a replica set, after restarts, merges and compactions,
// without a byte stored. Its 4 seconds are the measurement's second (as a
// MongoDB bucket's _id holds its first measurement's), its next 5 bytes
// the series' id, its last 3 the measurement's sub-second time in units of
// 100 ns. Two measurements of one series within the same 100 ns share it.
// A meta update, which moves measurements to another series, stores the
// ids of those it moves (storeMadeIDs).
func madeID(series uint64, t int64) [bucket.ObjectIDLen]byte {
	var id [bucket.ObjectIDLen]byte
	sec, sub := t/1e9, t%1e9
	if sub < 0 {
		sec, sub = sec-1, sub+1e9
	}
	binary.BigEndian.PutUint32(id[0:], uint32(sec))
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], series)
	copy(id[4:9], s[3:])
	u := sub / 100
	id[9], id[10], id[11] = byte(u>>16), byte(u>>8), byte(u)
	return id
}

// findFields returns the fields a find returns, in their order: _id
// first, where the collection never stored one (measurements written
// without one have one made), then the fields in the order the collection
// first saw them (its name table). DB.mu is held.
func (c *collection) findFields() []string { return c.findFieldsWith(nil) }

// findFieldsWith is findFields with the fields of more too (a read's
// archived rows: archiveView.types).
func (c *collection) findFieldsWith(more map[string]typeSet) []string {
	if c.opts.TimeSeries == nil {
		return nil
	}
	out := make([]string, 0, len(c.fieldTypes)+1)
	if c.fieldTypes[idField]|more[idField] == 0 {
		out = append(out, idField)
	}
	named := 0
	for _, f := range c.names {
		if c.fieldTypes[f]|more[f] != 0 {
			out = append(out, f)
			named++
		}
	}
	if named < len(c.fieldTypes) { // not reached: every field is named
		for f := range c.fieldTypes {
			if _, ok := c.nameIdx[f]; !ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// storeMadeIDs gives the rows of cols, measurements of the series of id
// series, that have no _id the one made for them (madeID), as a stored
// column: what a meta update does before it moves them to another series,
// whose id would make others. It changes nothing in place (a checkpoint
// may be encoding a capture that shares the column's arrays) and reports
// whether it changed cols; a column of _ids of another type with rows
// missing is left as it is (their ids follow the series they move to).
func storeMadeIDs(cols *bucket.Columns, series uint64) (added int64, changed bool) {
	rows := len(cols.Times)
	ci := -1
	for i := range cols.Fields {
		if cols.Fields[i].Name == idField {
			ci = i
			break
		}
	}
	if ci < 0 {
		ids := make([]byte, 0, rows*bucket.ObjectIDLen)
		for _, t := range cols.Times {
			id := madeID(series, t)
			ids = append(ids, id[:]...)
		}
		cols.Fields = append(cols.Fields[:len(cols.Fields):len(cols.Fields)], bucket.Column{Name: idField, Type: model.KindObjectID, IDs: ids})
		return int64(len(ids)) + columnHeaderMem, true
	}
	col := &cols.Fields[ci]
	if col.Present == nil || col.Type != model.KindObjectID {
		return 0, false
	}
	missing := false
	for r := range rows {
		if !col.IsPresent(r) {
			missing = true
			break
		}
	}
	if !missing {
		return 0, false
	}
	ids := append([]byte(nil), col.IDs...)
	for r, t := range cols.Times {
		if !col.IsPresent(r) {
			id := madeID(series, t)
			copy(ids[r*bucket.ObjectIDLen:], id[:])
		}
	}
	fields := append([]bucket.Column(nil), cols.Fields...)
	fields[ci] = bucket.Column{Name: idField, Type: model.KindObjectID, IDs: ids}
	cols.Fields = fields
	return 0, true
}
