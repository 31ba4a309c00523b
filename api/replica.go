package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/replset"
)

// Writer is what the server writes through (command.Writer): the engine,
// or on a replica set the member.
type Writer = command.Writer

// ReplicaSet makes the server a member of a replica set
// (docs/replication.md): writes go through Node, reads to Node.DB (which
// must be Options.DB).
type ReplicaSet struct {
	// Name is the set's name (serve's --replica-set).
	Name string
	// Node is this member. The members' HTTP addresses are those it knows
	// (Node.MemberAddrs): a follower names the leader's in its refusals,
	// and /v1/replset asks the others for their state there.
	Node *replset.Node
	// FaultInjection serves POST /v1/replset/partition, which cuts this
	// member off from the others for a while (the chaos run's network
	// partition). Never on a production set.
	FaultInjection bool
}

// httpAddr returns the HTTP address of member id, "" when unknown.
func (rs *ReplicaSet) httpAddr(id string) string { return rs.Node.MemberAddrs(id).HTTP }

// primaryOnly answers a write sent to a member of a replica set that is not
// the leader with the leader's address (421) or, during an election, 503,
// before the handler looks at this member's data: a follower may not
// have applied the collection the write names yet, and must not answer
// that it does not exist.
//
// The answer carries Hourglass-Applied-Index: the last log entry the
// leader had applied when it answered, which the write's entry is at or
// before; a read with afterIndex set to it sees the write on any member.
func (s *Server) primaryOnly(next http.Handler) http.Handler { return s.leaderOnly(next, nil) }

// primaryOnlyInflux is primaryOnly for the InfluxDB write endpoints, whose
// errors have InfluxDB's shape.
func (s *Server) primaryOnlyInflux(next http.Handler) http.Handler {
	return s.leaderOnly(next, func(w http.ResponseWriter, r *http.Request, err error) { s.writeInfluxError(w, r, err, 0) })
}

// primaryOnlyProm is primaryOnly for Prometheus' write endpoint, whose
// errors have Prometheus' shape.
func (s *Server) primaryOnlyProm(next http.Handler) http.Handler {
	return s.leaderOnly(next, s.writePromError)
}

func (s *Server) leaderOnly(next http.Handler, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	if refuse == nil {
		refuse = s.writeError
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cmd.CheckWrite(); err != nil {
			refuse(w, r, err)
			return
		}
		if _, _, ok := s.cmd.AppliedIndex(); !ok {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&appliedIndexWriter{ResponseWriter: w, cmd: s.cmd}, r)
	})
}

// appliedIndexWriter sets Hourglass-Applied-Index as the answer starts.
type appliedIndexWriter struct {
	http.ResponseWriter
	cmd     *command.Service
	started bool
}

func (a *appliedIndexWriter) WriteHeader(code int) {
	if !a.started {
		a.started = true
		index, _, _ := a.cmd.AppliedIndex()
		a.Header().Set(appliedHeader, strconv.FormatUint(index, 10))
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *appliedIndexWriter) Write(b []byte) (int, error) {
	if !a.started {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *appliedIndexWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Bounds of a read's wait for afterIndex.
const (
	defaultAfterIndexWait = 5 * time.Second
	maxAfterIndexWait     = time.Minute
)

// primaryHeader names the leader's HTTP address on a follower's refusal.
const primaryHeader = "Hourglass-Primary"

// replSetMember is one member in /v1/replset.
type replSetMember struct {
	ID           string     `json:"id"`
	Raft         string     `json:"raft"`
	HTTP         string     `json:"http,omitempty"`
	Self         bool       `json:"self,omitempty"`
	NonVoter     bool       `json:"nonVoter,omitempty"`
	State        string     `json:"state"`
	AppliedIndex *uint64    `json:"appliedIndex,omitempty"`
	LastContact  *time.Time `json:"lastContact,omitempty"`
	Error        string     `json:"error,omitempty"`
}

type replSetLeader struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http,omitempty"`
}

// replSetStatus is the reply of /v1/replset.
type replSetStatus struct {
	Set          string         `json:"set"`
	Self         string         `json:"self"`
	State        string         `json:"state"`
	Leader       *replSetLeader `json:"leader"`
	Term         uint64         `json:"term"`
	CommitIndex  uint64         `json:"commitIndex"`
	AppliedIndex uint64         `json:"appliedIndex"`
	// SnapshotIndex is the index of this member's newest snapshot, 0
	// when it has none.
	SnapshotIndex uint64          `json:"snapshotIndex"`
	LastContact   *time.Time      `json:"lastContact,omitempty"`
	Halted        string          `json:"halted,omitempty"`
	Members       []replSetMember `json:"members"`
}

// peerTimeout bounds the question /v1/replset asks each other member.
const peerTimeout = time.Second

// handleReplSet serves GET /v1/replset: the set as this member sees it,
// each other member's state and applied index as that member answers
// (?self=true: this member's view without asking the others).
func (s *Server) handleReplSet(w http.ResponseWriter, r *http.Request) {
	rs := s.member(w, r)
	if rs == nil {
		return
	}
	st := s.localReplSet()
	if r.URL.Query().Get("self") == "true" {
		writeJSON(w, http.StatusOK, st)
		return
	}
	var wg sync.WaitGroup
	for i := range st.Members {
		m := &st.Members[i]
		if m.Self {
			continue
		}
		if m.HTTP == "" {
			m.State, m.Error = "unknown", "its HTTP address is not known to this member"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.askPeer(r.Context(), m)
		}()
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, st)
}

// localReplSet is this member's view, its own entry filled in.
func (s *Server) localReplSet() replSetStatus {
	rs := s.opts.ReplicaSet
	ns := rs.Node.Status()
	st := replSetStatus{Set: rs.Name, Self: ns.ID, State: ns.Role.String(), Term: ns.Term,
		CommitIndex: ns.CommitIndex, AppliedIndex: ns.AppliedIndex, SnapshotIndex: ns.SnapshotIndex, Members: []replSetMember{}}
	if ns.LeaderID != "" {
		st.Leader = &replSetLeader{ID: ns.LeaderID, Raft: ns.LeaderAddr, HTTP: rs.httpAddr(ns.LeaderID)}
	}
	if !ns.LastContact.IsZero() {
		t := ns.LastContact.UTC()
		st.LastContact = &t
	}
	if ns.Halted != nil {
		st.Halted = ns.Halted.Error()
	}
	for _, m := range ns.Members {
		rm := replSetMember{ID: m.ID, Raft: m.Addr, HTTP: rs.httpAddr(m.ID), NonVoter: m.NonVoter}
		if m.ID == ns.ID {
			rm.Self, rm.State = true, st.State
			applied := ns.AppliedIndex
			rm.AppliedIndex, rm.LastContact = &applied, st.LastContact
		}
		st.Members = append(st.Members, rm)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st
}

// askPeer fills m with what the member answers on its /v1/replset?self=true.
func (s *Server) askPeer(ctx context.Context, m *replSetMember) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.HTTP+"/v1/replset?self=true", nil)
	if err != nil {
		m.State, m.Error = "unknown", err.Error()
		return
	}
	if s.opts.AuthToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.AuthToken)
	}
	resp, err := s.peers.Do(req)
	if err != nil {
		m.State, m.Error = "unreachable", err.Error()
		return
	}
	defer resp.Body.Close()
	var st replSetStatus
	if resp.StatusCode != http.StatusOK {
		m.State, m.Error = "unknown", fmt.Sprintf("its /v1/replset answered %s", resp.Status)
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&st); err != nil {
		m.State, m.Error = "unknown", fmt.Sprintf("its /v1/replset reply: %v", err)
		return
	}
	if st.Self != m.ID {
		m.State, m.Error = "unknown", fmt.Sprintf("the server at %s is member %q", m.HTTP, st.Self)
		return
	}
	m.State = st.State
	applied := st.AppliedIndex
	m.AppliedIndex, m.LastContact = &applied, st.LastContact
}

// Headers of a read a follower answers: the last raft entry its engine
// applied, and when it last heard from the primary (RFC 3339, absent if
// never): how far behind the primary the answer may be.
const (
	appliedHeader     = "Hourglass-Applied-Index"
	lastContactHeader = "Hourglass-Last-Contact"
)

// secondaryRead lets a find or aggregate through on a replica set member
// as the command layer rules (command.Service.BeforeRead): the primary
// answers every read; a secondary only one that asks for it with
// readPreference=secondary (or secondaryPreferred, primaryPreferred,
// nearest), as MongoDB's drivers do, and says in headers how far behind
// it may be; others are refused 421 NotPrimaryNoSecondaryOk (13435),
// naming the primary. With afterIndex=N (a write's Hourglass-Applied-Index)
// the read waits until this member has applied the log up to N, at most
// waitMS milliseconds (default 5 s), then 503 MaxTimeMSExpired. It
// reports whether the read goes on.
func (s *Server) secondaryRead(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	rc := command.ReadConcern{Wait: defaultAfterIndexWait, AfterName: "afterIndex"}
	switch q.Get("readPreference") {
	case "secondary", "secondaryPreferred", "primaryPreferred", "nearest":
		rc.SecondaryOK = true
	}
	if after := q.Get("afterIndex"); after != "" {
		if _, _, member := s.cmd.AppliedIndex(); !member {
			s.writeError(w, r, badRequest("afterIndex is for replica set members (serve --replica-set)"))
			return false
		}
		index, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			s.writeError(w, r, badRequest("afterIndex must be a log index (a non-negative integer), as Hourglass-Applied-Index gives it: %q", after))
			return false
		}
		rc.AfterIndex = index
		if v := q.Get("waitMS"); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxAfterIndexWait {
				s.writeError(w, r, badRequest("waitMS must be milliseconds from 0 to %d: %q", maxAfterIndexWait.Milliseconds(), v))
				return false
			}
			rc.Wait = max(time.Duration(ms)*time.Millisecond, time.Nanosecond)
		}
	}
	if err := s.cmd.BeforeRead(r.Context(), rc); err != nil {
		if r.Context().Err() == nil { // else the client went away
			s.writeError(w, r, err)
		}
		return false
	}
	if index, lastContact, member := s.cmd.AppliedIndex(); member && rc.SecondaryOK && !s.cmd.Primary() {
		w.Header().Set(appliedHeader, strconv.FormatUint(index, 10))
		if !lastContact.IsZero() {
			w.Header().Set(lastContactHeader, lastContact.UTC().Format(time.RFC3339Nano))
		}
	}
	return true
}

// handleAddMember serves POST /v1/replset/members on the leader: adds a
// member ({"id", "raft", "http", "mongo", "voter"}), as a non-voter unless
// voter is true; the same call with voter true gives a non-voter its vote.
func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) {
	rs := s.member(w, r)
	if rs == nil {
		return
	}
	var raw map[string]any
	if _, err := s.readJSONRequest(w, r, maxCommandBody, &raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	var a replset.MemberAddrs
	voter := false
	for k, v := range raw {
		var dst *string
		switch k {
		case "id":
			dst = &a.ID
		case "raft":
			dst = &a.Raft
		case "http":
			dst = &a.HTTP
		case "mongo":
			dst = &a.Mongo
		case "voter":
			b, ok := v.(bool)
			if !ok {
				s.writeError(w, r, badRequest("'voter' must be a boolean"))
				return
			}
			voter = b
			continue
		default:
			s.writeError(w, r, badRequest("unknown field %q: a member is {\"id\", \"raft\", \"http\", \"mongo\", \"voter\"}", k))
			return
		}
		str, ok := v.(string)
		if !ok {
			s.writeError(w, r, badRequest("'%s' must be a string", k))
			return
		}
		*dst = str
	}
	if a.ID == "" || a.Raft == "" || a.HTTP == "" {
		s.writeError(w, r, badRequest("a member needs 'id', 'raft' and 'http' (its raft and HTTP addresses, host:port)"))
		return
	}
	if err := rs.Node.AddMember(r.Context(), a, voter); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("replica set member added", "id", a.ID, "raft", a.Raft, "http", a.HTTP, "voter", voter)
	writeJSON(w, http.StatusOK, s.localReplSet())
}

// handleRemoveMember serves DELETE /v1/replset/members/{id} on the leader.
func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	rs := s.member(w, r)
	if rs == nil {
		return
	}
	id := chi.URLParam(r, "id")
	if err := rs.Node.RemoveMember(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("replica set member removed", "id", id)
	writeJSON(w, http.StatusOK, s.localReplSet())
}

// member returns the server's replica set; on a server that is not a
// member it answers the request with 404 and returns nil.
func (s *Server) member(w http.ResponseWriter, r *http.Request) *ReplicaSet {
	rs := s.opts.ReplicaSet
	if rs == nil {
		s.writeError(w, r, notAMember())
	}
	return rs
}

func notAMember() error {
	return newHTTPError(http.StatusNotFound, mongoerr.BadValue,
		"this server is not a replica set member (serve --replica-set)")
}

// handleSnapshot serves POST /v1/replset/snapshot: this member takes a
// snapshot now and compacts its log before it (replset.Node.Snapshot).
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	rs := s.member(w, r)
	if rs == nil {
		return
	}
	start := time.Now()
	err := rs.Node.Snapshot()
	taken := err == nil
	if errors.Is(err, replset.ErrNothingToSnapshot) {
		err = nil
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st := rs.Node.Status()
	writeJSON(w, http.StatusOK, map[string]any{"taken": taken, "snapshotIndex": st.SnapshotIndex,
		"appliedIndex": st.AppliedIndex, "tookMillis": time.Since(start).Milliseconds()})
}

// maxPartition bounds a partition asked of /v1/replset/partition.
const maxPartition = time.Minute

// handlePartition serves POST /v1/replset/partition?seconds=N (with
// fault injection on): this member's raft traffic is cut for N seconds
// while it keeps running (replset.Node.Partition).
func (s *Server) handlePartition(w http.ResponseWriter, r *http.Request) {
	rs := s.opts.ReplicaSet
	if rs == nil || !rs.FaultInjection {
		s.writeError(w, r, newHTTPError(http.StatusNotFound, mongoerr.BadValue,
			"fault injection is off (serve --fault-injection, for chaos runs only)"))
		return
	}
	secs, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
	d := time.Duration(secs * float64(time.Second))
	if err != nil || d <= 0 || d > maxPartition {
		s.writeError(w, r, badRequest("seconds must be a duration in seconds, above 0 and at most %d", int(maxPartition.Seconds())))
		return
	}
	s.log.Warn("replica set member cut off from the others (fault injection)", "for", d)
	rs.Node.Partition(d)
	writeJSON(w, http.StatusOK, map[string]any{"partitionedMillis": d.Milliseconds()})
}
