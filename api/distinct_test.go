package api_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestDistinctHTTP: POST and GET .../distinct answer {"values": [...]}
// from the command layer: a meta path within a time range (the series
// index), a measurement field, a plain collection's field with arrays
// unwound; dates as Extended JSON.
func TestDistinctHTTP(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	s.mustDo(201, "PUT", "/v1/collections/p", `{}`)
	s.mustDo(200, "POST", "/v1/collections/p/documents", `[{"_id": 1, "tags": ["b", "a"], "at": {"$date": "2024-05-01T12:00:00Z"}}, {"_id": 2, "tags": "c", "at": {"$date": "2024-05-01T12:00:00Z"}}, {"_id": 3}]`)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/collections/s/distinct", `{"key": "sensor"}`, `{"values":["a","b"]}`},
		{"POST", "/v1/collections/s/distinct", `{"key": "sensor", "filter": {"timestamp": {"$gte": {"$date": "2024-05-01T12:00:30Z"}}}}`, `{"values":["b"]}`},
		{"POST", "/v1/collections/s/distinct", `{"key": "temp", "filter": {"sensor": "b"}}`, `{"values":[10.0,11.0]}`},
		{"POST", "/v1/collections/s/distinct", `{"key": "nothing"}`, `{"values":[]}`},
		{"POST", "/v1/collections/p/distinct", `{"key": "tags"}`, `{"values":["a","b","c"]}`},
		{"POST", "/v1/collections/p/distinct", `{"key": "at"}`, `{"values":[{"$date":"2024-05-01T12:00:00Z"}]}`},
		{"GET", `/v1/collections/p/distinct?q={"key":"tags","filter":{"_id":{"$gt":1}}}`, ``, `{"values":["c"]}`},
	} {
		r := s.mustDo(200, c.method, c.path, c.body)
		if got := string(r.body); got != c.want+"\n" {
			t.Errorf("%s %s %s = %s, want %s", c.method, c.path, c.body, got, c.want)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
	// A regular expression in a measurement (the wire door writes one
	// as BSON) comes back as Extended JSON.
	re := model.BSONValue(bsoncore.TypeRegex, bsoncore.AppendRegex(nil, "^a", "i"))
	if _, err := s.db.Insert(context.Background(), "s", timeseries.Batch{Measurements: []model.Measurement{
		{Time: time.Date(2024, 5, 1, 12, 2, 0, 0, time.UTC).UnixNano(), Meta: "c", Fields: []model.Field{{Name: "re", Value: re}}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := s.mustDo(200, "POST", "/v1/collections/s/distinct", `{"key": "re"}`); string(r.body) != `{"values":[{"$regularExpression":{"pattern":"^a","options":"i"}}]}`+"\n" {
		t.Errorf("distinct of a regular expression: %s", r.body)
	}
	// Accept: JSON among others is JSON; none is 406.
	s.mustDo(200, "POST", "/v1/collections/s/distinct", `{"key": "sensor"}`, "Accept", "text/csv, application/json;q=0.5")
	s.mustDo(200, "POST", "/v1/collections/s/distinct", `{"key": "sensor"}`, "Accept", "*/*")
	s.mustDo(406, "POST", "/v1/collections/s/distinct", `{"key": "sensor"}`, "Accept", "text/csv")
	s.mustDo(406, "POST", "/v1/collections/s/distinct", `{"key": "sensor"}`, "Accept", "application/json;q=0")
	if r := s.mustDo(200, "HEAD", `/v1/collections/s/distinct?q={"key":"sensor"}`, ""); len(r.body) != 0 || r.header.Get("Content-Length") == "" {
		t.Errorf("HEAD: body %q, Content-Length %q", r.body, r.header.Get("Content-Length"))
	}
}
