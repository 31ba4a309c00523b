package api_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestTimeSeriesTypesOverHTTP: a measurement's values go in as Extended
// JSON and come back with their types (relaxed Extended JSON), arrays and
// sub-documents with their fields in order, a field of several types row
// by row, _id as given or made, null kept; fields after the time and
// meta fields in the order first written.
func TestTimeSeriesTypesOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "s"}}`)
	body := `{"t": {"$date": "2026-01-01T00:00:00Z"}, "s": "a", "_id": {"$oid": "0123456789abcdef01234567"}, "z": 7, "d": {"$numberDecimal": "1.10"}, "b": {"$binary": {"base64": "AQI=", "subType": "00"}}, "arr": [1, "x", {"q": 2, "a": 1}], "doc": {"y": true, "b": 2.5}}
{"t": {"$date": "2026-01-01T00:00:01Z"}, "s": "a", "_id": "given", "z": 7.5}
{"t": {"$date": "2026-01-01T00:00:02Z"}, "s": "a", "z": {"$numberLong": "8"}, "nul": null}
`
	s.mustDo(200, "POST", "/v1/collections/m/documents", body, "Content-Type", "application/x-ndjson")
	r := s.mustDo(200, "POST", "/v1/collections/m/find", `{"sort": {"t": 1}}`, "Accept", "application/x-ndjson")
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d measurements: %s", len(lines), r.body)
	}
	want := []string{
		`{"t":{"$date":"2026-01-01T00:00:00Z"},"s":"a","_id":{"$oid":"0123456789abcdef01234567"},"z":{"$numberLong":"7"},"d":{"$numberDecimal":"1.10"},"b":{"$binary":{"base64":"AQI=","subType":"00"}},"arr":[1,"x",{"q":2,"a":1}],"doc":{"y":true,"b":2.5}}`,
		`{"t":{"$date":"2026-01-01T00:00:01Z"},"s":"a","_id":"given","z":7.5}`,
		// The made _id is checked apart. z holds several types: an
		// integer of the JSON text is an int64, written so that it reads
		// back as one.
		`{"t":{"$date":"2026-01-01T00:00:02Z"},"s":"a","_id":ID,"z":{"$numberLong":"8"},"nul":null}`,
	}
	for i, l := range lines {
		w := want[i]
		if strings.Contains(w, "ID") {
			at := strings.Index(l, `"_id":{"$oid":"`)
			if at < 0 || len(l) < at+40 {
				t.Fatalf("measurement %d: no made ObjectId: %s", i, l)
			}
			w = strings.Replace(w, "ID", l[at+6:at+6+35], 1)
		}
		if l != w {
			t.Errorf("measurement %d:\n got %s\nwant %s", i, l, w)
		}
	}
	// The _id and the decimal in filters.
	if rows := s.findRows("m", `{"filter": {"_id": {"$oid": "0123456789abcdef01234567"}}}`); len(rows) != 1 {
		t.Errorf("by ObjectId: %v", rows)
	}
	if rows := s.findRows("m", `{"filter": {"d": {"$gt": 1}}}`); len(rows) != 1 {
		t.Errorf("decimal > 1: %v", rows)
	}
}

// TestTimeSeriesMetaTypesOverHTTP: a meta value of any type goes in as
// Extended JSON and comes back relaxed ({"$numberInt": "5"} as 5,
// ObjectIds and decimals as their wrappers, sub-document fields in name
// order as MongoDB normalizes them), in JSON and CSV; a plain JSON
// integer is an int64 in a meta value, whether an insert or an update
// writes it, so the two land in one series.
func TestTimeSeriesMetaTypesOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "s"}}`)
	body := `{"t": {"$date": "2026-01-01T00:00:00Z"}, "s": {"$numberInt": "5"}, "v": 1}
{"t": {"$date": "2026-01-01T00:00:01Z"}, "s": {"site": "n", "id": {"$numberInt": "7"}, "oid": {"$oid": "0123456789abcdef01234567"}, "d": {"$numberDecimal": "1.10"}}, "v": 2}
{"t": {"$date": "2026-01-01T00:00:02Z"}, "s": {"id": 9}, "v": 3}
`
	s.mustDo(200, "POST", "/v1/collections/m/documents", body, "Content-Type", "application/x-ndjson")
	r := s.mustDo(200, "POST", "/v1/collections/m/find", `{"sort": {"t": 1}, "projection": {"_id": 0}}`, "Accept", "application/x-ndjson")
	want := `{"t":{"$date":"2026-01-01T00:00:00Z"},"s":5,"v":1}
{"t":{"$date":"2026-01-01T00:00:01Z"},"s":{"d":{"$numberDecimal":"1.10"},"id":7,"oid":{"$oid":"0123456789abcdef01234567"},"site":"n"},"v":2}
{"t":{"$date":"2026-01-01T00:00:02Z"},"s":{"id":9},"v":3}
`
	if string(r.body) != want {
		t.Errorf("find:\n got %s\nwant %s", r.body, want)
	}
	r = s.mustDo(200, "POST", "/v1/collections/m/find", `{"sort": {"t": 1}, "projection": {"_id": 0, "v": 0}}`, "Accept", "text/csv")
	if got := string(r.body); !strings.Contains(got, ",5\n") || !strings.Contains(got, `"{""d"":{""$numberDecimal"":""1.10""},""id"":7,`) {
		t.Errorf("csv:\n%s", got)
	}
	// Types as stored: the int32 stays one; the update's 9 is an int64,
	// as the insert's was, so the two are one series.
	s.mustDo(200, "POST", "/v1/collections/m/update", `{"filter": {"s.id": 9}, "update": {"$set": {"s.id": 10}}, "multi": true}`)
	s.mustDo(200, "POST", "/v1/collections/m/documents", `[{"t": {"$date": "2026-01-01T00:00:03Z"}, "s": {"id": 10}, "v": 4}]`)
	types := map[string]int{}
	cur, err := s.db.Find(context.Background(), "m", timeseries.FindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next() {
		rec := cur.Record()
		for _, col := range rec.Columns() {
			meta, ok := col.(*array.String)
			if !ok {
				continue
			}
			for i := range meta.Len() {
				v, err := model.DecodeMeta(meta.Value(i))
				if err != nil {
					t.Fatal(err)
				}
				if m, ok := v.(map[string]any); ok {
					v = m["id"]
				}
				types[fmt.Sprintf("%T %v", v, v)]++
			}
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	cur.Close()
	if want := map[string]int{"int32 5": 1, "int32 7": 1, "int64 10": 2}; !maps.Equal(types, want) {
		t.Errorf("meta ids stored as %v, want %v", types, want)
	}
}
