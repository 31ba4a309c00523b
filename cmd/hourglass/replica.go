package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

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
	// join is the HTTP address of a member of an existing set that this
	// member joins (instead of --members).
	join string
	// snapshotThreshold and trailingLogs are replset.Options'.
	snapshotThreshold, trailingLogs uint64
	// faultInjection serves /v1/replset/partition (chaos runs).
	faultInjection bool
}

// replicaMember is one entry of --members.
type replicaMember struct {
	id, raft, http string
	mongo          string // its MongoDB listener, "" when the set serves none
}

// enabled reports whether any replica-set flag is set.
func (c *replicaConfig) enabled() bool {
	return c.name != "" || c.nodeID != "" || c.raftListen != "" || c.members != "" || c.join != ""
}

// parseJoin checks the flags of a member that joins a set (--join) and
// returns it alone, with the addresses the others will reach it at: its
// --listen and, when given, its --mongo-listen.
func (c *replicaConfig) parseJoin(listen, mongoListen string) ([]replicaMember, error) {
	switch {
	case c.name == "" || c.nodeID == "" || c.raftListen == "":
		return nil, errors.New("a member that joins a set needs --replica-set, --node-id and --raft-listen with --join")
	case c.members != "":
		return nil, errors.New("--join and --members: a member that joins learns the others from the set; give one or the other")
	}
	for _, a := range []struct{ flag, addr string }{{"--raft-listen", c.raftListen}, {"--listen", listen}, {"--mongo-listen", mongoListen}} {
		if a.addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", a.flag, a.addr, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return nil, fmt.Errorf("%s %q: a member that joins gives the others the address it listens on; name a host or IP they reach it at", a.flag, a.addr)
		}
	}
	return []replicaMember{{id: c.nodeID, raft: c.raftListen, http: listen, mongo: mongoListen}}, nil
}

// joinURL returns the base URL of --join, which may be given as
// host:port.
func joinURL(s string) string {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return strings.TrimRight(s, "/")
	}
	return "http://" + strings.TrimRight(s, "/")
}

// joinTimeout bounds how long a member that joins tries to be added.
const joinTimeout = time.Minute

// askToJoin asks the set's leader, through the member at base (following
// 421 to the leader, retrying 503 during an election), to add self, as a
// voter when voter is set. It checks the set's name first.
func askToJoin(ctx context.Context, base, token, setName string, self replicaMember, voter bool) error {
	body, err := json.Marshal(map[string]any{"id": self.id, "raft": self.raft, "http": self.http, "mongo": self.mongo, "voter": voter})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 15 * time.Second}
	do := func(method, url string, body []byte) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, b, err
	}
	url := base
	var last error
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("join replica set %s through %s: %w (last answer: %v)", setName, base, err, last)
		}
		resp, b, err := do(http.MethodGet, url+"/v1/replset?self=true", nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			var st struct {
				Set string `json:"set"`
			}
			if err := json.Unmarshal(b, &st); err != nil {
				return fmt.Errorf("join: %s/v1/replset: %v", url, err)
			}
			if st.Set != setName {
				return fmt.Errorf("join: the member at %s is in replica set %q, not %q (--replica-set)", url, st.Set, setName)
			}
			resp, b, err = do(http.MethodPost, url+"/v1/replset/members", body)
		}
		switch {
		case err != nil:
			last = err
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get("Hourglass-Primary") != "":
			url = "http://" + resp.Header.Get("Hourglass-Primary")
			continue
		case resp.StatusCode == http.StatusServiceUnavailable:
			last = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
		default:
			return fmt.Errorf("join replica set %s through %s: %s: %s", setName, url, resp.Status, bytes.TrimSpace(b))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
		url = base
	}
}

// joinSet adds this new member to the set as a non-voter, then, once it
// has caught up with the leader (a snapshot, then the log), asks for its
// vote. It logs its progress; ctx ends it.
func joinSet(ctx context.Context, n *replset.Node, base, token, setName string, self replicaMember, log *slog.Logger) error {
	actx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	log.Info("joining replica set", "set", setName, "through", base)
	if err := askToJoin(actx, base, token, setName, self, false); err != nil {
		return err
	}
	log.Info("added to the replica set as a non-voter; catching up", "set", setName)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st := n.Status()
			voter := false
			for _, m := range st.Members {
				voter = voter || (m.ID == self.id && !m.NonVoter)
			}
			if voter {
				log.Info("a voting member of the replica set", "set", setName, "applied", st.AppliedIndex)
				return
			}
			if st.LeaderID == "" || st.CommitIndex == 0 || st.AppliedIndex < st.CommitIndex {
				continue
			}
			vctx, cancel := context.WithTimeout(ctx, joinTimeout)
			err := askToJoin(vctx, base, token, setName, self, true)
			cancel()
			if err != nil {
				log.Error("asking for this member's vote failed; retrying", "err", err)
				continue
			}
			log.Info("caught up: a voting member of the replica set", "set", setName, "applied", st.AppliedIndex)
			return
		}
	}()
	return nil
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
