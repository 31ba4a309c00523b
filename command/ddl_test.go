package command

import (
	"context"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// TestCollMod: the index change goes first, and a refused one changes
// nothing of the collection; every change wakes the TTL monitor (a pass
// runs at once, not after its hour of sleep).
func TestCollMod(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mon, err := ttl.New(ttl.Options{Store: db, Sleep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mon.Start()
	defer mon.Close()
	s, err := New(Options{DB: db, TTL: mon})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.CreateCollection(ctx, "c", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "m"}}); err != nil {
		t.Fatal(err)
	}
	waitPasses := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); mon.Stats().Passes < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d TTL passes, want %d: the monitor was not woken", mon.Stats().Passes, n)
			}
		}
	}
	p0 := mon.Stats().Passes
	day := int64(86400)
	_, err = s.CollMod(ctx, "c", CollMod{Index: &timeseries.IndexMod{Name: "nosuch", ExpireAfterSeconds: 60},
		Collection: &timeseries.CollModOptions{ExpireAfterSeconds: &day}})
	if mongoerr.CodeOf(err) != mongoerr.IndexNotFound {
		t.Fatalf("collMod of an unknown index: %v, want IndexNotFound", err)
	}
	if info, _ := db.Describe(ctx, "c"); info.Options.ExpireAfterSeconds != nil {
		t.Fatalf("a refused index change changed the collection: %v", *info.Options.ExpireAfterSeconds)
	}
	res, err := s.CollMod(ctx, "c", CollMod{Collection: &timeseries.CollModOptions{ExpireAfterSeconds: &day}})
	if err != nil || res.Index != nil || res.Collection == nil || *res.Collection.NewExpireAfterSeconds != day {
		t.Fatalf("collMod: %+v, %v", res, err)
	}
	waitPasses(p0 + 1)
}
