package api_test

import (
	"strings"
	"testing"
)

// TestTimeSeriesTypesOverHTTP: a measurement's values go in as Extended
// JSON and come back with their types (relaxed Extended JSON), arrays and
// sub-documents with their fields in order, a field of several types row
// by row, _id as given or made; fields after the time and meta fields in
// the order first written.
func TestTimeSeriesTypesOverHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.mustDo(201, "PUT", "/v1/collections/m", `{"timeseries": {"timeField": "t", "metaField": "s"}}`)
	body := `{"t": {"$date": "2026-01-01T00:00:00Z"}, "s": "a", "_id": {"$oid": "0123456789abcdef01234567"}, "z": 7, "d": {"$numberDecimal": "1.10"}, "b": {"$binary": {"base64": "AQI=", "subType": "00"}}, "arr": [1, "x", {"q": 2, "a": 1}], "doc": {"y": true, "b": 2.5}}
{"t": {"$date": "2026-01-01T00:00:01Z"}, "s": "a", "_id": "given", "z": 7.5}
{"t": {"$date": "2026-01-01T00:00:02Z"}, "s": "a", "z": {"$numberLong": "8"}}
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
		`{"t":{"$date":"2026-01-01T00:00:02Z"},"s":"a","_id":ID,"z":{"$numberLong":"8"}}`,
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
