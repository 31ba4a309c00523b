package replset

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hourglassdb/hourglass/timeseries"
)

// Options configure a Node. The zero value of every field but ID, Dir and
// Addr means its default.
type Options struct {
	// ID is the member's raft ID, unique in the set and kept across
	// restarts. Required.
	ID string
	// Dir is the member's directory: Dir/engine, Dir/raft, Dir/snapshots.
	// Required.
	Dir string
	// Addr is the host:port the member listens on for raft traffic, and the
	// address other members reach it at. Port 0 picks a free port
	// (Node.Addr tells it); a member that restarts must keep its address.
	// Required.
	Addr string

	// Addrs are the members' addresses the member was started with
	// (serve's --members). MemberAddrs falls back on them for a member
	// the log has not recorded; the leader records them in the log.
	Addrs []MemberAddrs

	// Engine configures the member's engine; its Dir is ignored
	// (Dir/engine) and a nil Logger is Options.Logger.
	Engine timeseries.Options

	// ApplyTimeout bounds how long a write waits to be committed by a
	// majority and applied on the leader. Default 10 s: several election
	// timeouts, so that a write outlives a failover it did not cause.
	ApplyTimeout time.Duration

	// HeartbeatTimeout and ElectionTimeout are how long a follower or a
	// candidate waits without hearing from a leader before it starts an
	// election; LeaderLeaseTimeout is how long a leader stays one without
	// hearing from a majority. Defaults are raft's (1 s, 1 s, 500 ms),
	// which are sized for a LAN; failover takes about one to two of them
	// (docs/replication.md has the measured time).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// TransportTimeout bounds one raft RPC to another member. Default 10 s,
	// raft's own recommendation for its TCP transport.
	TransportTimeout time.Duration

	// SnapshotThreshold is how many log entries past the last snapshot
	// make the member take one, SnapshotInterval how often it checks, and
	// TrailingLogs how many entries before a snapshot it keeps (a member
	// further behind than that is sent the snapshot). A snapshot is a
	// checkpoint of the engine (its buckets in memory written out, then
	// a Pebble checkpoint: hard links), after which the log before it is
	// deleted. Defaults: 1024 entries, 30 s, 1024 entries: an ingest
	// entry is a request's batch (up to megabytes), and the log is on
	// disk uncompressed until a snapshot.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// Logger receives the member's logs, raft's at Debug level. Default:
	// discard.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultApplyTimeout       = 10 * time.Second
	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultTransportTimeout   = 10 * time.Second
	DefaultSnapshotThreshold  = 1024
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultTrailingLogs       = 1024
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.ApplyTimeout == 0 {
		o.ApplyTimeout = DefaultApplyTimeout
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = DefaultElectionTimeout
	}
	if o.LeaderLeaseTimeout == 0 {
		o.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
	}
	if o.TransportTimeout == 0 {
		o.TransportTimeout = DefaultTransportTimeout
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.TrailingLogs == 0 {
		o.TrailingLogs = DefaultTrailingLogs
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.ID == "":
		return errors.New("replset: Options.ID is required")
	case o.Dir == "":
		return errors.New("replset: Options.Dir is required")
	case o.Addr == "":
		return errors.New("replset: Options.Addr is required")
	case o.ApplyTimeout < 0, o.HeartbeatTimeout < 0, o.ElectionTimeout < 0, o.LeaderLeaseTimeout < 0, o.TransportTimeout < 0, o.SnapshotInterval < 0:
		return fmt.Errorf("replset: negative timeout in options of %s", o.ID)
	case o.LeaderLeaseTimeout > o.HeartbeatTimeout:
		return fmt.Errorf("replset: LeaderLeaseTimeout %s exceeds HeartbeatTimeout %s", o.LeaderLeaseTimeout, o.HeartbeatTimeout)
	}
	return nil
}
