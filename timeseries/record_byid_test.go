package timeseries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/hourglassdb/hourglass/model"
)

// TestReplayByID: inserts logged after a checkpoint name its series by
// id, and replay puts every row back in its series, through a crash,
// beside series new since the checkpoint (logged by key), after a
// checkpoint that failed (its series not yet durable: logged by key
// still), and after a checkpoint that wrote new series once more.
func TestReplayByID(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var want []string
	step := 0
	insert := func(sensors ...int) {
		t.Helper()
		var ms []model.Measurement
		for _, i := range sensors {
			ts := base + int64(step)*10e9
			ms = append(ms, model.Measurement{Time: ts, Meta: sensor(fmt.Sprint("s", i)),
				Fields: []model.Field{{Name: "v", Value: model.Float(float64(step*100 + i))}}})
			want = append(want, row{t: ts, meta: fmt.Sprintf(`{"id":"s%d"}`, i), vals: fmt.Sprintf("v=%d ", step*100+i)}.String())
		}
		step++
		if res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatalf("insert: %v %v", err, res.Errors)
		}
	}
	durable := func() (n int) {
		c, _ := db.lookup("m")
		for _, s := range c.byID {
			if s.durable.Load() {
				n++
			}
		}
		return n
	}
	insert(0, 1, 2)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := durable(); n != 3 {
		t.Fatalf("%d series durable after a checkpoint, want 3", n)
	}
	insert(0, 1, 2, 3) // three by id, one by key
	insert(3, 0)
	// A checkpoint that fails leaves s3 not durable: logged by key.
	db.hooks.checkpointWrite = func() error { return errors.New("injected") }
	if err := db.Checkpoint(); err == nil {
		t.Fatal("the injected failure did not fail the checkpoint")
	}
	db.hooks.checkpointWrite = nil
	if n := durable(); n != 3 {
		t.Fatalf("%d series durable after a failed checkpoint, want 3", n)
	}
	insert(3, 1, 4)
	crash(db)

	db = openTest(t, dir, nil)
	got := rowStrings(findRows(t, db, "m", FindOptions{}))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after replay:\n got %v\nwant %v", got, want)
	}
	// Loaded series are durable; a checkpoint makes the replayed new
	// ones so; what is logged after it replays again.
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := durable(); n != 5 {
		t.Fatalf("%d series durable after the second checkpoint, want 5", n)
	}
	insert(4, 3, 2)
	crash(db)
	db = openTest(t, dir, nil)
	got = rowStrings(findRows(t, db, "m", FindOptions{}))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the second replay:\n got %v\nwant %v", got, want)
	}
}

func rowStrings(rs []row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	slices.Sort(out)
	return out
}

// TestDecodeLegacyInsert: an insert record of kind 1 (every group by its
// meta key), as stores written before kind 6 hold in their log, decodes.
func TestDecodeLegacyInsert(t *testing.T) {
	rec := []byte{recInsert}
	rec = binary.AppendUvarint(rec, 3) // collection
	rec = binary.AppendUvarint(rec, 1) // names
	rec = appendString(rec, "v")
	rec = binary.AppendUvarint(rec, 2) // groups
	for i, key := range []string{`"x"`, `"y"`} {
		rec = appendString(rec, key)
		rec = binary.AppendUvarint(rec, 1)           // rows
		rec = binary.AppendVarint(rec, int64(5+2*i)) // time: whole at each group
		rec = binary.AppendUvarint(rec, 1)           // fields
		rec = binary.AppendUvarint(rec, 0)           // name index
		rec = append(rec, byte(model.KindFloat))
		rec = binary.LittleEndian.AppendUint64(rec, math.Float64bits(2.5+float64(i)))
	}
	coll, groups, err := decodeInsert(rec[1:], false)
	if err != nil || coll != 3 || len(groups) != 2 {
		t.Fatal(coll, groups, err)
	}
	for i, g := range groups {
		if g.metaKey != []string{`"x"`, `"y"`}[i] || g.ref != 0 || len(g.rows) != 1 || g.rows[0].Time != int64(5+2*i) ||
			g.rows[0].Fields[0].Name != "v" || g.rows[0].Fields[0].Value.F != 2.5+float64(i) {
			t.Fatalf("group %d decoded %+v", i, g)
		}
	}
	// The same bytes read as kind 6 are another record: the group's
	// first byte is its series reference.
	if _, groups, err := decodeInsert(rec[1:], true); err == nil && groups[0].metaKey == `"x"` {
		t.Fatal("kind 6 read a kind 1 record as it is")
	}
}

// BenchmarkInsertRecord: an insert record of a fleet's batch, one row of
// each of 10,000 sensors (line protocol's meta keys, one float field),
// encoded and S2-compressed as the log stores it, with every series named
// by its meta key (not yet durable) and by its id (durable), the values
// readings of one decimal or whole numbers (whole=true):
//
//	go test ./timeseries -run '^$' -bench InsertRecord
func BenchmarkInsertRecord(b *testing.B) {
	for _, durable := range []bool{false, true} {
		for _, whole := range []bool{false, true} {
			b.Run(fmt.Sprintf("durable=%v/whole=%v", durable, whole), func(b *testing.B) {
				groups := make([]group, 10000)
				for i := range groups {
					key := fmt.Sprintf(`{"_measurement":"iot","kind":"k%d","sensor":"s%06d","site":"site-%d"}`, i%3, i, i%100)
					s := &series{id: uint64(100000 + i), metaKey: key}
					s.durable.Store(durable)
					v := float64(i%997) / 10 // a reading of one decimal
					if whole {
						v = float64(i % 997) // a whole one, as a counter's
					}
					groups[i] = group{metaKey: key, s: s, rows: []model.Measurement{{Time: 1704067200e9 + int64(i)*7919,
						Fields: []model.Field{{Name: "value", Value: model.Float(v)}}}}}
				}
				var e recordEncoder
				var buf, out []byte
				for b.Loop() {
					buf = e.encodeInsert(buf[:0], 1, groups)
					out = s2.Encode(out[:cap(out)], buf)
				}
				b.ReportMetric(float64(len(buf)), "record-bytes")
				b.ReportMetric(float64(len(out)), "s2-bytes")
			})
		}
	}
}
