package replset

import (
	"errors"
	"fmt"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// Errors of the package, checked with errors.Is.
var (
	// ErrNotLeader is wrapped by *NotLeaderError: the member that was asked
	// to write is not the leader.
	ErrNotLeader = errors.New("replset: not the leader")
	// ErrClosed is returned by a Node's methods after Close.
	ErrClosed = errors.New("replset: node closed")
	// ErrCorrupt reports bytes in the raft store or the log that do not
	// decode. It wraps mongoerr.ErrCorrupt, as every layer's corruption does.
	ErrCorrupt = mongoerr.Corrupt("replset: corrupt encoding")
	// ErrTimeout is returned by a write not committed within the apply
	// timeout. The write may still be committed and applied later.
	ErrTimeout = errors.New("replset: write not committed in time")
	// ErrHalted is returned by writes on a member that stopped applying
	// the log after an engine error that other members may not have had
	// (I/O, a full disk): applying further entries would make it diverge.
	ErrHalted = errors.New("replset: member halted")
	// ErrLeadershipLost is returned by a write whose leader lost the lead
	// before the entry was committed: the next leader may or may not
	// have it.
	ErrLeadershipLost = errors.New("replset: leadership lost before the write was committed")
	// ErrNothingToSnapshot is Node.Snapshot's answer when nothing was
	// applied since the last snapshot.
	ErrNothingToSnapshot = errors.New("replset: nothing applied since the last snapshot")
	// ErrStandaloneDir is returned by Open for a directory that holds the
	// store of a server that is not a member.
	ErrStandaloneDir = errors.New("replset: not a member's directory")
	// ErrNotSeedable is returned (wrapped) by ParseSeed and Seed for a
	// backup that cannot seed a member: one taken on a server that is not
	// a member, one whose member state does not decode, or one of a member
	// that had applied nothing.
	ErrNotSeedable = errors.New("replset: the backup cannot seed a member")
)

// NotLeaderError is returned by a write sent to a member that is not the
// leader. Leader is the raft address of the leader this member knows of,
// "" while there is none (an election is running).
type NotLeaderError struct {
	Leader   string
	LeaderID string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "replset: not the leader; no leader is known (an election may be running)"
	}
	return fmt.Sprintf("replset: not the leader; leader is %s (%s)", e.Leader, e.LeaderID)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
