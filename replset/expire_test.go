package replset

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// The leader's TTL decisions (a cutoff per rule) remove the same
// measurements and documents on every member; followers have no targets.
func TestExpireReplicated(t *testing.T) {
	s := startSet(t, 3)
	li := s.leader()
	l := s.nodes[li]
	ctx := context.Background()
	now := time.Now().UTC()
	hour := int64(3600)
	opts := sensorOpts
	opts.ExpireAfterSeconds = &hour
	if _, err := l.CreateCollection(ctx, "cpu", opts); err != nil {
		t.Fatal(err)
	}
	// Sensor s0 keeps a minute.
	minute := int64(60)
	if _, _, err := l.CreateIndex(ctx, "cpu", timeseries.IndexSpec{Key: []timeseries.IndexKey{{Field: "t", Direction: 1}},
		ExpireAfterSeconds: &minute, PartialFilterExpression: map[string]any{"sensor": "s0"}}); err != nil {
		t.Fatal(err)
	}
	var ms []model.Measurement
	for _, sensor := range []string{"s0", "s1"} {
		for _, age := range []time.Duration{2 * time.Hour, 30 * time.Minute, 10 * time.Second} {
			ms = append(ms, model.Measurement{Time: now.Add(-age).UnixNano(), Meta: sensor,
				Fields: []model.Field{{Name: "v", Value: model.Float(1)}}})
		}
	}
	if _, err := l.Insert(ctx, "cpu", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateCollection(ctx, "events", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.CreateIndex(ctx, "events", timeseries.IndexSpec{Key: []timeseries.IndexKey{{Field: "at", Direction: 1}},
		ExpireAfterSeconds: &hour}); err != nil {
		t.Fatal(err)
	}
	docs := []document.Doc{{"at": now.Add(-2 * time.Hour)}, {"at": now.Add(-time.Minute)}, {"at": "not a date"}}
	if _, err := l.Insert(ctx, "events", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitStored("cpu", 6)
	s.waitStored("events", 3)

	for i, n := range s.nodes {
		if i == li {
			continue
		}
		if ts, err := n.Targets(ctx); err != nil || len(ts) != 0 {
			t.Fatalf("follower %s has targets %v, %v", n.ID(), ts, err)
		}
		if _, err := n.Expire(ctx, ttl.Target{Collection: "cpu"}, now, ttl.Budget{}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Expire on a follower: %v, want ErrNotLeader", err)
		}
	}
	targets, err := l.Targets(ctx)
	if err != nil || len(targets) != 3 {
		t.Fatalf("leader's targets %v, %v; want 3", targets, err)
	}
	var deleted int64
	for _, tg := range targets {
		b, err := l.Expire(ctx, tg, now, ttl.Budget{})
		if err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		deleted += b.Docs
	}
	// s1 keeps 30 min and 10 s, s0 10 s; events keep the recent date and
	// the string.
	if deleted != 3+1 {
		t.Fatalf("deleted %d, want 4", deleted)
	}
	s.waitStored("cpu", 3)
	s.waitStored("events", 2)
}

// waitStored waits up to 10 s for every member to store want measurements
// or documents in coll, expired ones not yet removed included.
func (s *testSet) waitStored(coll string, want int64) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		var got []int64
		for _, n := range s.nodes {
			info, err := n.DB().Describe(context.Background(), coll)
			if err != nil {
				info.Count = -1 // not created there yet
			}
			got = append(got, info.Count)
			ok = ok && info.Count == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: members store %v, want %d on each", coll, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
