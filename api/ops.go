package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hourglassdb/hourglass/command"
)

// beginOp lists an HTTP request's operation with those of every door;
// the caller must endOp it.
func (s *Server) beginOp(kind, collection string, r *http.Request, desc string) *command.Op {
	return s.beginDoorOp(command.HTTP, kind, collection, r, desc)
}

// beginDoorOp is beginOp for an operation of door served on the HTTP
// port (the Prometheus endpoints).
func (s *Server) beginDoorOp(door command.Door, kind, collection string, r *http.Request, desc string) *command.Op {
	o := &command.Op{Kind: kind, DB: mongoDatabase, Collection: collection, Door: door, Desc: desc}
	if r != nil {
		o.Client = r.RemoteAddr
	}
	return s.cmd.Ops().Begin(o)
}

func (s *Server) endOp(o *command.Op) { s.cmd.Ops().End(o) }

// mongoDatabase is the database MongoDB clients see every collection in
// (mongowire.DatabaseName), which the HTTP API's operations are listed in.
const mongoDatabase = "hourglass"

// opInfo is one entry of currentop's "inprog" array, in MongoDB's shape.
type opInfo struct {
	OpID             int64  `json:"opid"`
	Op               string `json:"op"`
	NS               string `json:"ns,omitempty"`
	Client           string `json:"client,omitempty"`
	Desc             string `json:"desc,omitempty"`
	Active           bool   `json:"active"`
	SecsRunning      int64  `json:"secs_running"`
	MicrosecsRunning int64  `json:"microsecs_running"`
	CurrentOpTime    string `json:"currentOpTime"`
	DocumentsHandled int64  `json:"documentsHandled"`
}

// opInfoOf is o as /v1/currentop lists it: the collection as ns, or the
// database of a command on one; a MongoDB command's desc names its
// connection and command.
func opInfoOf(o command.OpInfo) opInfo {
	info := opInfo{OpID: o.ID, Op: o.Kind, NS: o.Collection, Client: o.Client, Desc: o.Desc, Active: true,
		SecsRunning: int64(o.Age / time.Second), MicrosecsRunning: int64(o.Age / time.Microsecond),
		CurrentOpTime: o.Start.UTC().Format(time.RFC3339Nano), DocumentsHandled: o.Docs.Load()}
	if o.Door == command.MongoDB {
		info.Desc = fmt.Sprintf("conn%d %s", o.ConnID, o.Desc)
		if o.Collection == "" {
			info.NS = o.DB
		}
	}
	return info
}

func (s *Server) handleCurrentOp(w http.ResponseWriter, r *http.Request) {
	ops := []opInfo{}
	for _, o := range s.cmd.Ops().List() {
		ops = append(ops, opInfoOf(o))
	}
	if s.opts.TTL != nil {
		if cur := s.opts.TTL.Current(); cur != nil {
			// The TTL monitor's batch, as MongoDB shows it: a remove by the
			// "TTLMonitor" client.
			age := s.opts.Now().Sub(cur.Started)
			ops = append(ops, opInfo{Op: "remove", NS: cur.Target.Collection, Client: "TTLMonitor",
				Desc: "TTLMonitor " + cur.Target.String(), Active: true,
				SecsRunning: int64(age / time.Second), MicrosecsRunning: int64(age / time.Microsecond),
				CurrentOpTime: cur.Started.UTC().Format(time.RFC3339Nano)})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"inprog": ops, "ok": 1})
}

// isClientGone reports errors caused by the client leaving.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
