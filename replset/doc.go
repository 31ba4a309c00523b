// Package replset replicates an Hourglass engine across the members of a
// replica set with Raft (github.com/hashicorp/raft). hourglass serve
// --replica-set serves it over the HTTP API (package api) and the MongoDB
// wire protocol (package mongowire); docs/replication.md has the design,
// what exists and what remains.
//
// A Node is one member: a raft node whose log and stable state (term,
// vote, the last applied index, the members' addresses) live in a Pebble
// store of its own in Dir/raft, a TCP transport, and a state machine that
// applies committed commands to the member's engine (Dir/engine) through
// the exported API of package timeseries. Writes (create, drop, indexes,
// collMod, insert of measurements or of documents, delete, update,
// replace) go through Node on the leader and return once a majority holds
// them and the leader applied them, with the engine's answer; on a
// follower they fail with a *NotLeaderError naming the leader ("not the
// leader; leader is <addr>"). Reads go to Node.DB on any member. A member
// just elected leads only once it has applied every entry committed
// before its term.
//
// The raft log sits before the engine's own log for now: each member's
// engine logs and syncs what it applies, and the member records the last
// applied index after each batch of entries, so that a restarted member
// skips what its engine holds and applies the rest. A member that did not
// close cleanly rebuilds its engine from its newest snapshot and the log
// after it, since a crash between the two could apply a batch twice; the
// engine change that closes the window (the engine's checkpoint records
// the applied index) is in docs/replication.md.
//
// Snapshots are checkpoints of the engine (timeseries.DB.CheckpointTo:
// hard links) kept in a store of directories (Dir/snapshots); after one,
// raft deletes the log before it. A member further behind than the log
// reaches is sent the leader's newest snapshot as a stream and loads it
// into its running engine (timeseries.DB.ReplaceFrom). Members are added
// (as non-voters, then given their vote) and removed while the set runs
// (AddMember, RemoveMember).
//
// A backup of a member's engine (package backup) records the member's
// raft state at the index its image holds; Seed makes a new member's
// directory of the restored engine, which the leader sends the log after
// that index.
//
// A Node is the ttl.Store of a TTL monitor: it has targets on the leader
// only, where Expire decides a cutoff per rule and replicates the deletes
// it implies, so that every member removes the same measurements although
// their bucket layouts differ (docs/replication.md).
//
// A member whose engine fails in a way other members may not (I/O, a full
// disk, corruption) halts: it stops applying and leaves the set's traffic
// rather than diverge. Refusals (unknown collection, invalid options, a
// measurement the collection does not take) are the same on every member
// and are returned to the writer.
//
// # Usage
//
// Three members on one machine; Bootstrap runs once, on one member of a
// set that never ran:
//
//	var nodes []*replset.Node
//	var members []replset.Member
//	for i, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
//		n, err := replset.Open(replset.Options{ID: fmt.Sprintf("n%d", i+1), Dir: dirs[i], Addr: addr})
//		if err != nil {
//			return err
//		}
//		defer n.Close()
//		nodes = append(nodes, n)
//		members = append(members, replset.Member{ID: n.ID(), Addr: n.Addr()})
//	}
//	if err := nodes[0].Bootstrap(members); err != nil {
//		return err
//	}
//	addr, _, err := nodes[0].WaitLeader(ctx)
//	// Write through the member whose Addr is addr; any other answers
//	// a *NotLeaderError with that address.
package replset
