package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
)

// CheckWrite refuses a write this server cannot take: on a member of a
// replica set that is not the primary, a *replset.NotLeaderError, which
// Classify names the primary in at each door's address (a halted or closed
// member's error likewise). It is nil on a server of its own.
func (s *Service) CheckWrite() error {
	if s.opts.Node == nil {
		return nil
	}
	return s.opts.Node.CheckLeader()
}

// ReadConcern is what a read asks of a replica set member before it
// reads. Outside a replica set nothing is waited for.
type ReadConcern struct {
	// SecondaryOK lets a secondary serve the read (a read preference other
	// than primary); otherwise a secondary refuses it
	// (NotPrimaryNoSecondaryOk, naming the primary).
	SecondaryOK bool
	// Linearizable makes the read wait, on the primary only, until a
	// majority confirms it still leads and it has applied every write
	// committed when the read arrived.
	Linearizable bool
	// AfterIndex, when above 0, makes the read wait until this member has
	// applied the log up to it: the index a write's answer carried, so
	// that the read sees that write.
	AfterIndex uint64
	// AfterName is what the door's clients call AfterIndex, for messages
	// (afterIndex, afterClusterTime).
	AfterName string
	// Wait bounds the waits; past it the read fails with
	// MaxTimeMSExpired. Zero means 10 s.
	Wait time.Duration
}

// defaultReadWait bounds a read's wait when it gives none.
const defaultReadWait = 10 * time.Second

// secondaryReadError is a secondary's refusal of a read that asked for the
// primary; Classify words it for each door.
type secondaryReadError struct {
	member, set, leaderID string
}

func (e *secondaryReadError) Error() string {
	return fmt.Sprintf("member %s of replica set %s is a secondary", e.member, e.set)
}

// BeforeRead makes a read wait as rc asks, or refuses it: a secondary
// refuses a read without SecondaryOK, and one that is not the primary a
// linearizable read (NotWritablePrimary). It is nil at once on a server
// of its own.
func (s *Service) BeforeRead(ctx context.Context, rc ReadConcern) error {
	node := s.opts.Node
	if node == nil {
		return nil
	}
	if !rc.SecondaryOK && node.Role() != replset.RoleLeader {
		_, id := node.Leader()
		return &secondaryReadError{member: node.ID(), set: s.opts.SetName, leaderID: id}
	}
	if !rc.Linearizable && rc.AfterIndex == 0 {
		return nil
	}
	wait := rc.Wait
	if wait <= 0 {
		wait = defaultReadWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if rc.Linearizable {
		err := node.ReadBarrier(wctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return mongoerr.New(mongoerr.MaxTimeMSExpired,
				"operation exceeded time limit: member %s could not confirm within %s that it still leads and has applied every acknowledged write (linearizable read)", node.ID(), wait)
		}
		return err
	}
	err := node.WaitApplied(wctx, rc.AfterIndex)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return mongoerr.New(mongoerr.MaxTimeMSExpired,
			"operation exceeded time limit: member %s has applied the log up to %d, not yet to %s %d, within %s; retry, or read from the primary",
			node.ID(), node.AppliedIndex(), rc.AfterName, rc.AfterIndex, wait)
	}
	return err
}

// AppliedIndex returns the index of the last log entry this member's
// engine applied, and when it last heard from the primary (zero if never
// or on the primary); ok is false outside a replica set.
func (s *Service) AppliedIndex() (index uint64, lastContact time.Time, ok bool) {
	node := s.opts.Node
	if node == nil {
		return 0, time.Time{}, false
	}
	st := node.Status()
	return st.AppliedIndex, st.LastContact, true
}

// secondaryRead words a secondaryReadError for door.
func (s *Service) secondaryRead(e *secondaryReadError, door Door) Class {
	c := Class{Code: mongoerr.NotPrimaryNoSecondaryOk, HTTPStatus: http.StatusMisdirectedRequest, ErrorType: "unavailable"}
	if door == MongoDB {
		c.Primary = s.opts.Node.MemberAddrs(e.leaderID).Mongo
		c.Message = fmt.Sprintf("not primary and secondaryOk=false: member %s of replica set %s is a secondary; ask for readPreference secondary or primaryPreferred to read here",
			e.member, e.set)
		return c
	}
	c.Primary = s.opts.Node.MemberAddrs(e.leaderID).HTTP
	c.Message = fmt.Sprintf("member %s of replica set %s is a secondary: add readPreference=secondary to read here (its data may be behind the primary's)", e.member, e.set)
	if c.Primary != "" {
		c.Message += ", or read from the primary at " + c.Primary
	}
	return c
}

// Primary reports whether this server takes writes: it is the primary of
// its replica set, or in none.
func (s *Service) Primary() bool {
	return s.opts.Node == nil || s.opts.Node.Role() == replset.RoleLeader
}
