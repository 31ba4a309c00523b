package replset

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestMultiPartDDL: on a replica set, createIndexes and dropIndexes of a
// list and a collMod of several parts are one log entry each; one that is
// refused (an index of the list that cannot be dropped or created, a part
// of the collMod) changes nothing on any member, and one that is accepted
// changes every member the same way.
func TestMultiPartDDL(t *testing.T) {
	s := startSet(t, 3)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// l is the leader; onLeader runs f on it, again on the next leader
	// when an election came first (a refusal before anything is logged).
	l := s.nodes[s.leader()]
	onLeader := func(f func() error) error {
		for deadline := time.Now().Add(20 * time.Second); ; {
			err := f()
			var nl *NotLeaderError
			if !errors.As(err, &nl) || time.Now().After(deadline) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			l = s.nodes[s.leader()]
		}
	}
	key := func(f string) []timeseries.IndexKey { return []timeseries.IndexKey{{Field: f, Direction: 1}} }
	hour := int64(3600)
	must(onLeader(func() error {
		_, err := l.CreateCollection(ctx, "p", timeseries.CollectionOptions{})
		return err
	}))
	must(onLeader(func() error {
		_, err := l.Insert(ctx, "p", timeseries.Batch{Documents: []document.Doc{{"_id": int64(1), "a": int64(1), "b": int64(2)}}}, timeseries.InsertOptions{})
		return err
	}))
	must(onLeader(func() error {
		_, err := l.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}})
		return err
	}))
	must(onLeader(func() error {
		_, err := l.CreateIndexes(ctx, "p", []timeseries.IndexSpec{{Key: key("a")}})
		return err
	}))
	must(onLeader(func() error {
		_, err := l.CreateIndexes(ctx, "m", []timeseries.IndexSpec{{Name: "ttl_a", Key: key("t"), ExpireAfterSeconds: &hour,
			PartialFilterExpression: map[string]any{"s": "a"}}})
		return err
	}))

	// state renders both collections on every member, once each has
	// applied what the leader has.
	state := func() []string {
		t.Helper()
		applied := l.AppliedIndex()
		var out []string
		for _, n := range s.nodes {
			must(n.WaitApplied(ctx, applied))
			var one []any
			for _, c := range []string{"p", "m"} {
				info, err := n.DB().DescribeShallow(ctx, c)
				must(err)
				one = append(one, info.Options, info.Indexes)
			}
			b, err := json.Marshal(one)
			must(err)
			out = append(out, string(b))
		}
		for i := range out {
			if out[i] != out[0] {
				t.Fatalf("members differ:\n%s\n%s", out[0], out[i])
			}
		}
		return out
	}
	day := int64(86400)
	for _, c := range []struct {
		what string
		do   func() error
		code mongoerr.Code
	}{
		{"dropIndexes [a_1, _id_]", func() error { return l.DropIndexes(ctx, "p", []string{"a_1", "_id_"}) }, mongoerr.InvalidOptions},
		{"dropIndexes [a_1, nope]", func() error { return l.DropIndexes(ctx, "p", []string{"a_1", "nope"}) }, mongoerr.IndexNotFound},
		{"createIndexes [b_1, a name taken]", func() error {
			_, err := l.CreateIndexes(ctx, "p", []timeseries.IndexSpec{{Key: key("b")}, {Name: "a_1", Key: key("c")}})
			return err
		}, mongoerr.IndexKeySpecsConflict},
		{"collMod of a TTL, an index and a finer granularity", func() error {
			_, err := l.CollMod(ctx, "m", timeseries.CollModOptions{ExpireAfterSeconds: &day, Index: &timeseries.IndexMod{Name: "ttl_a", ExpireAfterSeconds: 60},
				TimeSeries: &model.TimeSeriesOptions{Granularity: "seconds", BucketMaxSpanSeconds: 60, BucketRoundingSeconds: 60}})
			return err
		}, mongoerr.InvalidOptions},
	} {
		before := state()
		err := onLeader(c.do)
		if mongoerr.CodeOf(err) != c.code {
			t.Fatalf("%s: %v, want code %d", c.what, err, c.code)
		}
		if after := state(); after[0] != before[0] {
			t.Fatalf("%s refused, yet changed the members:\n%s\n%s", c.what, before[0], after[0])
		}
	}

	for _, c := range []struct {
		what string
		op   Op
		do   func() error
	}{
		{"createIndexes [b_1, c_1]", OpCreateIndexes, func() error {
			res, err := l.CreateIndexes(ctx, "p", []timeseries.IndexSpec{{Key: key("b")}, {Key: key("c")}})
			if err == nil && (len(res) != 2 || !res[0].Created || !res[1].Created) {
				t.Fatalf("createIndexes replied %+v", res)
			}
			return err
		}},
		{"dropIndexes [a_1, b_1]", OpDropIndexes, func() error { return l.DropIndexes(ctx, "p", []string{"a_1", "b_1"}) }},
		{"collMod of a TTL, an index and the granularity", OpCollModIndexed, func() error {
			res, err := l.CollMod(ctx, "m", timeseries.CollModOptions{ExpireAfterSeconds: &day, Index: &timeseries.IndexMod{Name: "ttl_a", ExpireAfterSeconds: 60},
				TimeSeries: &model.TimeSeriesOptions{Granularity: "hours"}})
			if err == nil && (res.Index == nil || res.Index.NewExpireAfterSeconds != 60 || *res.NewExpireAfterSeconds != day) {
				t.Fatalf("collMod replied %+v", res)
			}
			return err
		}},
	} {
		before := state()
		var from, to uint64
		must(onLeader(func() error {
			from = l.AppliedIndex()
			err := c.do()
			to = l.AppliedIndex()
			return err
		}))
		after := state()
		if after[0] == before[0] {
			t.Fatalf("%s changed nothing", c.what)
		}
		// One command entry (an election may add entries of its own):
		// the command, whole.
		var cmds []*Command
		for i := from + 1; i <= to; i++ {
			var entry raft.Log
			must(l.store.GetLog(i, &entry))
			if entry.Type == raft.LogCommand {
				cmd, err := decodeCommand(entry.Data)
				must(err)
				cmds = append(cmds, cmd)
			}
		}
		if len(cmds) != 1 || cmds[0].Op != c.op {
			t.Fatalf("%s logged %d commands in entries %d..%d (%v), want one %s", c.what, len(cmds), from+1, to, cmds, c.op)
		}
	}
	for _, n := range s.nodes {
		info, err := n.DB().DescribeShallow(ctx, "p")
		must(err)
		if len(info.Indexes) != 1 || info.Indexes[0].Name != "c_1" {
			t.Fatalf("%s's indexes of p: %+v", n.opts.ID, info.Indexes)
		}
	}
}
