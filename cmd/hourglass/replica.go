package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/replset"
)

// replicaConfig is a replica set member's flags: the set's name, this
// member's ID and raft address, and every member as
// id=raft-host:port/http-host:port[/mongo-host:port].
type replicaConfig struct {
	name       string
	nodeID     string
	raftListen string
	members    string
}

// replicaMember is one entry of --members.
type replicaMember struct {
	id, raft, http string
	mongo          string // its MongoDB listener, "" when the set serves none
}

// enabled reports whether any replica-set flag is set.
func (c *replicaConfig) enabled() bool {
	return c.name != "" || c.nodeID != "" || c.raftListen != "" || c.members != ""
}

// parse checks the flags together and returns the members, this one
// among them.
func (c *replicaConfig) parse() ([]replicaMember, error) {
	if c.name == "" || c.nodeID == "" || c.raftListen == "" || c.members == "" {
		return nil, errors.New("a replica set member needs --replica-set, --node-id, --raft-listen and --members together")
	}
	var ms []replicaMember
	seen := map[string]bool{}
	self := false
	for e := range strings.SplitSeq(c.members, ",") {
		e = strings.TrimSpace(e)
		id, addrs, ok := strings.Cut(e, "=")
		raftAddr, rest, _ := strings.Cut(addrs, "/")
		httpAddr, mongoAddr, withMongo := strings.Cut(rest, "/")
		if !ok || id == "" || raftAddr == "" || httpAddr == "" || (withMongo && mongoAddr == "") {
			return nil, fmt.Errorf("--members entry %q: want id=raft-host:port/http-host:port[/mongo-host:port]", e)
		}
		addrList := []string{raftAddr, httpAddr}
		if withMongo {
			addrList = append(addrList, mongoAddr)
		}
		for _, a := range addrList {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("--members entry %q: %v", e, err)
			}
		}
		if len(ms) > 0 && (ms[0].mongo != "") != withMongo {
			return nil, errors.New("--members: give every member a MongoDB address (id=raft/http/mongo), or none")
		}
		if seen[id] {
			return nil, fmt.Errorf("--members names %q twice", id)
		}
		seen[id] = true
		if id == c.nodeID {
			self = true
			if raftAddr != c.raftListen {
				return nil, fmt.Errorf("--members gives %s the raft address %s, --raft-listen is %s: the others reach it at the one in --members", id, raftAddr, c.raftListen)
			}
		}
		ms = append(ms, replicaMember{id: id, raft: raftAddr, http: httpAddr, mongo: mongoAddr})
	}
	if !self {
		return nil, fmt.Errorf("--members does not name this member, --node-id %q", c.nodeID)
	}
	return ms, nil
}

// bootstrap makes members a new set when this member has never run;
// every member of a new set is given the same members, and raft keeps
// one configuration. A member with state keeps the set it was in.
func bootstrap(n *replset.Node, members []replicaMember) (bool, error) {
	var rm []replset.Member
	for _, m := range members {
		rm = append(rm, replset.Member{ID: m.id, Addr: m.raft})
	}
	err := n.Bootstrap(rm)
	if errors.Is(err, raft.ErrCantBootstrap) {
		return false, nil
	}
	return err == nil, err
}
