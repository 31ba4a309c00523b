package mongowire

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
)

// ReplicaSet makes the server a member of a replica set
// (docs/replication.md): hello describes the set the way MongoDB's members
// do, so drivers given replicaSet=<name> find the primary and follow a
// failover; writes go through Node (refused with NotWritablePrimary on a
// secondary); reads on a secondary need a read preference that allows
// them.
type ReplicaSet struct {
	// Name is the set's name (serve's --replica-set).
	Name string
	// Node is this member; Options.DB must be Node.DB(). The members'
	// MongoDB addresses (hello's hosts, primary and me) are those it knows
	// (Node.MemberAddrs).
	Node *replset.Node
}

// mongoAddr returns the MongoDB address of member id, "" when unknown.
func (rs *ReplicaSet) mongoAddr(id string) string { return rs.Node.MemberAddrs(id).Mongo }

// Commands by what they do on a replica set: writes, which the log
// carries, go to the primary; reads are served by a secondary only when
// the client's read preference allows it.
var (
	replicatedWrites = map[string]bool{"insert": true, "create": true, "drop": true, "createIndexes": true, "delete": true,
		"collMod": true, "dropIndexes": true, "update": true, "dropDatabase": true}
	secondaryReads = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}
)

// replicaCheck refuses a write the command layer refuses: one sent to a
// secondary of a replica set (NotWritablePrimary, naming the primary).
// Reads are checked with their read concern (readConcern).
func (s *Server) replicaCheck(cmd *wireCommand) error {
	if replicatedWrites[cmd.name] {
		return s.cmd.CheckWrite()
	}
	return nil
}

// secondaryOk reports whether cmd's $readPreference lets a secondary
// answer it.
func secondaryOk(cmd *wireCommand) bool {
	v, err := cmd.body.LookupErr("$readPreference")
	if err != nil {
		return false
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return false
	}
	mode, _ := doc.Lookup("mode").StringValueOK()
	return mode != "" && mode != "primary"
}

// helloReplica adds to a hello reply what a replica set member reports:
// the set's name and members, the primary, this member's role.
func (s *Server) helloReplica(d bson.D, primaryKey string) bson.D {
	rs := s.opts.ReplicaSet
	if rs == nil {
		return d
	}
	// Voters are hosts, non-voters passives, as MongoDB lists its
	// members of priority 0.
	var hosts, passives bson.A
	for _, m := range rs.Node.Members() {
		addr := rs.mongoAddr(m.ID)
		switch {
		case addr == "":
		case m.NonVoter:
			passives = append(passives, addr)
		default:
			hosts = append(hosts, addr)
		}
	}
	isPrimary := rs.Node.Role() == replset.RoleLeader
	for i := range d {
		if d[i].Key == primaryKey {
			d[i].Value = isPrimary
		}
	}
	d = append(d, bson.E{Key: "setName", Value: rs.Name}, bson.E{Key: "hosts", Value: hosts},
		bson.E{Key: "secondary", Value: !isPrimary}, bson.E{Key: "me", Value: rs.mongoAddr(rs.Node.ID())},
		bson.E{Key: "setVersion", Value: int32(1)})
	if len(passives) > 0 {
		d = append(d, bson.E{Key: "passives", Value: passives})
	}
	if _, id := rs.Node.Leader(); id != "" && rs.mongoAddr(id) != "" {
		d = append(d, bson.E{Key: "primary", Value: rs.mongoAddr(id)})
	}
	return d
}

// cmdReplSetGetStatus answers replSetGetStatus (mongosh's rs.status()) as
// this member sees its set: the set's name, this member's state and term,
// and each voter of the configuration with its state (PRIMARY for the
// leader this member knows, SECONDARY for the others) and, for this
// member, its raft address, the last log entry its engine applied and
// when it last heard from the primary. The health of other members is not
// known here and is left out. A server outside a set answers
// NoReplicationEnabled, as MongoDB does.
func cmdReplSetGetStatus(s *Server, _ *conn, _ *wireCommand) (bson.D, error) {
	rs := s.opts.ReplicaSet
	if rs == nil {
		return nil, mongoerr.New(mongoerr.NoReplicationEnabled, "not running with --replica-set")
	}
	st := rs.Node.Status()
	state := func(id string) (int32, string) {
		switch {
		case id == st.LeaderID && id != "":
			return 1, "PRIMARY"
		case id == st.ID && st.Role == replset.RoleShutdown:
			return 8, "DOWN"
		}
		return 2, "SECONDARY"
	}
	var list bson.A
	for i, m := range st.Members {
		name := rs.mongoAddr(m.ID)
		if name == "" {
			name = m.Addr
		}
		code, str := state(m.ID)
		d := bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: name}, {Key: "state", Value: code}, {Key: "stateStr", Value: str},
			{Key: "raftId", Value: m.ID}, {Key: "raftAddr", Value: m.Addr}}
		if m.ID == st.ID {
			d = append(d, bson.E{Key: "health", Value: 1.0}, bson.E{Key: "self", Value: true},
				bson.E{Key: "appliedIndex", Value: int64(st.AppliedIndex)})
			if !st.LastContact.IsZero() {
				d = append(d, bson.E{Key: "lastHeartbeatRecv", Value: bson.NewDateTimeFromTime(st.LastContact)})
			}
		}
		list = append(list, d)
	}
	my, _ := state(st.ID)
	return bson.D{
		{Key: "set", Value: rs.Name},
		{Key: "date", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "myState", Value: my},
		{Key: "term", Value: int64(st.Term)},
		{Key: "commitIndex", Value: int64(st.CommitIndex)},
		{Key: "members", Value: list},
	}, nil
}
