package replset

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// Expiry in a set (docs/replication.md, "TTL"). A Node is a ttl.Store: a
// TTL monitor given the Node runs on every member but finds work on the
// leader only. There, Expire turns a rule of a time-series collection into
// a cutoff, "the measurements of the series the rule matches with a time
// before now - TTL", and replicates it as a delete, so that every member
// removes the same measurements whatever its bucket layout. A TTL index of
// a plain collection is replicated as the engine's expiry at the leader's
// time (OpExpireDocuments): documents are laid out alike everywhere.

var _ ttl.Store = (*Node)(nil)

// Targets lists the TTL rules of the leader's engine (ttl.Store); on any
// other member it lists none, so a monitor there stays idle.
func (n *Node) Targets(ctx context.Context) ([]ttl.Target, error) {
	if n.Role() != RoleLeader {
		return nil, nil
	}
	return n.db.Targets(ctx)
}

// Expire replicates the deletion of what t's rule has expired at now
// (ttl.Store). The cutoff is decided here, once; the budget is not used:
// one entry removes everything before the cutoff. A target that no longer
// exists is an empty batch; on a follower it fails with a
// *NotLeaderError.
func (n *Node) Expire(ctx context.Context, t ttl.Target, now time.Time, _ ttl.Budget) (ttl.Batch, error) {
	if err := n.checkLeader(); err != nil {
		return ttl.Batch{}, err
	}
	c, ok, err := n.expiryCommand(ctx, t, now)
	if err != nil || !ok {
		return ttl.Batch{}, err
	}
	r, err := n.Apply(ctx, c)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return ttl.Batch{}, nil // dropped since
	}
	return ttl.Batch{Docs: r.Deleted}, err
}

// expiryCommand returns the delete that applies t's rule at now; false when
// the rule no longer exists.
func (n *Node) expiryCommand(ctx context.Context, t ttl.Target, now time.Time) (*Command, bool, error) {
	info, err := n.db.DescribeShallow(ctx, t.Collection)
	if mongoerr.CodeOf(err) == mongoerr.NamespaceNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if info.Options.TimeSeries == nil {
		// Plain documents are laid out alike on every member: the
		// engine's own expiry at the leader's time removes the same ones.
		return &Command{Op: OpExpireDocuments, Collection: t.Collection, Index: timeseries.IndexSpec{Name: t.Index}, Now: now.UnixNano()}, true, nil
	}
	var (
		seconds *int64
		partial map[string]any
	)
	field := info.Options.TimeSeries.TimeField
	archives := false
	if t.Index == "" {
		seconds, archives = info.Options.ExpireAfterSeconds, info.Options.Archive
	} else {
		for _, ix := range info.Indexes {
			if ix.Name == t.Index {
				seconds, partial, archives = ix.ExpireAfterSeconds, ix.PartialFilterExpression, ix.Archive
			}
		}
	}
	// A set does not archive (docs/archive.md): a rule that archives
	// keeps its data rather than delete what should have been moved.
	if seconds == nil || archives {
		return nil, false, nil
	}
	// A measurement expires when now > time + TTL.
	cutoff := now.Add(-time.Duration(*seconds) * time.Second).UTC()
	filter := maps.Clone(partial)
	if filter == nil {
		filter = document.Doc{}
	}
	// Measurements outside 1970-2038 never expire (docs/ttl.md).
	cond := document.Doc{"$lt": cutoff, "$gte": time.Unix(0, 0).UTC()}
	if _, dup := filter[field]; dup {
		return nil, false, fmt.Errorf("replset: TTL rule %s: its partial filter names the TTL field %q", t, field)
	}
	filter[field] = cond
	return &Command{Op: OpDelete, Collection: t.Collection, Filter: document.AppendJSON(nil, filter)}, true, nil
}
