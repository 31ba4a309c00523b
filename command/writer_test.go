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

// TestUpdateRefusedBeforeTheLog: an update of a time-series collection is
// refused by the command layer's writer before a replica set logs it (the
// member's applied index does not move), with the message both doors give.
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
	if _, err := w.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t"}}); err != nil {
		t.Fatal(err)
	}
	before := n.AppliedIndex()
	_, err = w.Update(ctx, "m", timeseries.Update{Replacement: document.Doc{"x": int64(1)}})
	if mongoerr.CodeOf(err) != mongoerr.IllegalOperation || !strings.Contains(err.Error(), "updates serve plain collections") {
		t.Fatalf("update of a time series: %v", err)
	}
	if after := n.AppliedIndex(); after != before {
		t.Fatalf("the refused update was logged: applied index %d -> %d", before, after)
	}
}
