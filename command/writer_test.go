package command_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
	"github.com/hourglassdb/hourglass/timeseries"
)

// A replica set member writes as the engine does.
var _ command.Writer = (*replset.Node)(nil)

// TestUpdateRefusedBeforeTheLog: an update of a time-series collection
// that is not a meta update is refused by the command layer's writer
// before a replica set logs it (the member's applied index does not
// move), with MongoDB's code and message, which both doors give; a meta
// update is logged and made.
func TestUpdateRefusedBeforeTheLog(t *testing.T) {
	n, err := replset.Open(replset.Options{ID: "n1", Dir: t.TempDir(), Addr: "127.0.0.1:0", Engine: timeseries.Options{NoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Bootstrap([]replset.Member{{ID: "n1", Addr: n.Addr()}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); n.Role() != replset.RoleLeader; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader within 10 s")
		}
	}
	s, err := command.New(command.Options{DB: n.DB(), Node: n})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := s.Writer()
	if _, err := w.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Insert(ctx, "m", timeseries.Batch{Measurements: []model.Measurement{{Time: 1, Meta: "a", Fields: []model.Field{{Name: "v", Value: model.Int(1)}}}}}, timeseries.InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	set := func(path string) *document.Update {
		u, err := document.ParseUpdate(map[string]any{"$set": map[string]any{path: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, r := range []struct {
		u    timeseries.Update
		want string
	}{
		{timeseries.Update{Replacement: document.Doc{"x": int64(1)}}, "using a replacement document"},
		{timeseries.Update{Operators: set("v"), Multi: true}, "updates a field that is not the metaField 's'"},
		{timeseries.Update{Operators: set("s")}, "non-multi update"},
	} {
		before := n.AppliedIndex()
		_, err = w.Update(ctx, "m", r.u)
		if mongoerr.CodeOf(err) != mongoerr.InvalidOptions || !strings.Contains(err.Error(), r.want) {
			t.Fatalf("update of a time series: %v, want InvalidOptions with %q", err, r.want)
		}
		if after := n.AppliedIndex(); after != before {
			t.Fatalf("the refused update was logged: applied index %d -> %d", before, after)
		}
	}
	before := n.AppliedIndex()
	res, err := w.Update(ctx, "m", timeseries.Update{Operators: set("s"), Multi: true})
	if err != nil || res.Matched != 1 || res.Modified != 1 || n.AppliedIndex() == before {
		t.Fatalf("a meta update: %+v, %v, applied index %d -> %d", res, err, before, n.AppliedIndex())
	}
}
