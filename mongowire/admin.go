package mongowire

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/model"

	"github.com/prometheus/procfs"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// opKinds are currentOp's op of the commands that are not "command".
var opKinds = map[string]string{"find": "query", "getMore": "getmore", "insert": "insert",
	"update": "update", "delete": "remove", "count": "command", "distinct": "command"}

// beginOp lists cmd, which c runs, with the operations of every door.
func (s *Server) beginOp(c *conn, cmd *wireCommand) *command.Op {
	kind := opKinds[cmd.name]
	if kind == "" {
		kind = "command"
	}
	o := &command.Op{Kind: kind, DB: cmd.db, Door: command.MongoDB, Client: c.nc.RemoteAddr().String(), ConnID: c.id, Desc: cmd.name}
	if v, err := cmd.body.LookupErr(cmd.name); err == nil {
		if coll, ok := v.StringValueOK(); ok {
			o.Collection = coll
		}
	}
	body := cmd.body // the request's, which it owns until the op ends
	o.Command = func() map[string]any {
		// The command as sent, but for values the engine's value set
		// lacks (the session id is a binary UUID).
		m := map[string]any{}
		model.EachBSONElement(body, func(k string, v bsoncore.Value) error {
			if x, err := model.ValueFromBSON(k, v, 0); err == nil {
				m[k] = x
			}
			return nil
		})
		return m
	}
	return s.cmd.Ops().Begin(o)
}

// opEntry describes an operation in progress, from any door, as
// currentOp's inprog does.
func opEntry(host string, o command.OpInfo) map[string]any {
	e := map[string]any{
		"type": "op", "host": host, "client": o.Client, "active": true, "opid": o.ID,
		"secs_running": int64(o.Age / time.Second), "microsecs_running": int64(o.Age / time.Microsecond),
		"op": o.Kind, "currentOpTime": o.Start.UTC().Format(time.RFC3339Nano),
	}
	if o.Door == command.MongoDB {
		e["desc"] = "conn" + string(itoa(nil, int(o.ConnID)))
		e["connectionId"] = o.ConnID
		e["ns"] = o.DB + ".$cmd"
		if o.Collection != "" {
			e["ns"] = o.DB + "." + o.Collection
		}
		if o.CommandDoc != nil {
			e["command"] = o.CommandDoc
		}
		return e
	}
	// Another door's request: its description, and the database every
	// collection is listed in.
	e["desc"] = o.Desc
	e["ns"] = DatabaseName + ".$cmd"
	if o.Collection != "" {
		e["ns"] = DatabaseName + "." + o.Collection
	}
	e["command"] = map[string]any{"http": o.Desc}
	e["documentsHandled"] = o.Docs.Load()
	return e
}

// errAdminOnly is MongoDB's refusal of an admin command run elsewhere.
func adminOnly(cmd *wireCommand) error {
	if cmd.db != "admin" {
		return mongoerr.New(mongoerr.Unauthorized, "%s may only be run against the admin database.", cmd.name)
	}
	return nil
}

func (s *Server) noMonitor() error {
	return mongoerr.New(mongoerr.IllegalOperation, "this server has no TTL monitor")
}

// serverParameters are the parameters getParameter answers, with their
// current values.
// A server without a TTL monitor has featureCompatibilityVersion only.
func (s *Server) serverParameters() (bson.D, error) {
	out := bson.D{{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "7.0"}}}}
	if s.opts.TTL == nil {
		return out, nil
	}
	return append(out,
		bson.E{Key: "ttlMonitorEnabled", Value: s.opts.TTL.Enabled()},
		bson.E{Key: "ttlMonitorSleepSecs", Value: int32(max(s.opts.TTL.Sleep()/time.Second, 1))},
	), nil
}

// cmdGetParameter answers ttlMonitorEnabled, ttlMonitorSleepSecs and
// featureCompatibilityVersion (mongosh asks for it when it connects), or
// all of them with getParameter: "*".
func cmdGetParameter(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	if err := adminOnly(cmd); err != nil {
		return nil, err
	}
	all, err := s.serverParameters()
	if err != nil {
		return nil, err
	}
	if v, _ := cmd.body.LookupErr(cmd.name); v.Type == bsoncore.TypeString && v.StringValue() == "*" {
		return all, nil
	}
	var out bson.D
	err = model.EachBSONElement(cmd.body, func(k string, _ bsoncore.Value) error {
		if k == cmd.name || genericFields[k] {
			return nil
		}
		for _, e := range all {
			if e.Key == k {
				out = append(out, e)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no option found to get; Hourglass has ttlMonitorEnabled, ttlMonitorSleepSecs and featureCompatibilityVersion")
	}
	return out, nil
}

// cmdSetParameter sets ttlMonitorEnabled and ttlMonitorSleepSecs on the
// running monitor, the settings `hourglass serve --ttl-monitor-enabled`
// and `--ttl-monitor-sleep` start with. Like MongoDB's, the change lasts
// until the server stops. The reply's "was" is the previous value.
func cmdSetParameter(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	if err := adminOnly(cmd); err != nil {
		return nil, err
	}
	if s.opts.TTL == nil {
		return nil, s.noMonitor()
	}
	var enabled *bool
	var sleep time.Duration
	n := 0
	err := model.EachBSONElement(cmd.body, func(k string, v bsoncore.Value) error {
		if k == cmd.name || genericFields[k] {
			return nil
		}
		n++
		switch k {
		case "ttlMonitorEnabled":
			b, ok := v.BooleanOK()
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "ttlMonitorEnabled must be a boolean")
			}
			enabled = &b
		case "ttlMonitorSleepSecs":
			secs, ok := v.AsInt64OK()
			if !ok || secs < 1 || secs > 1<<31-1 {
				return mongoerr.New(mongoerr.BadValue, "ttlMonitorSleepSecs must be a whole number of seconds, at least 1")
			}
			sleep = time.Duration(secs) * time.Second
		default:
			return mongoerr.New(mongoerr.InvalidOptions, "attempted to set unrecognized parameter [%s]; Hourglass sets ttlMonitorEnabled and ttlMonitorSleepSecs", k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, mongoerr.New(mongoerr.BadValue, "setParameter takes exactly one parameter; got %d", n)
	}
	if enabled != nil {
		was := s.opts.TTL.SetEnabled(*enabled)
		s.log.Info("TTL monitor setting changed", "ttlMonitorEnabled", *enabled, "was", was)
		return bson.D{{Key: "was", Value: was}}, nil
	}
	was, err := s.opts.TTL.SetSleep(sleep)
	if err != nil {
		return nil, mongoerr.New(mongoerr.BadValue, "%v", err)
	}
	s.log.Info("TTL monitor setting changed", "ttlMonitorSleepSecs", int64(sleep/time.Second), "was", int64(was/time.Second))
	return bson.D{{Key: "was", Value: int32(max(was/time.Second, 1))}}, nil
}

// cmdServerStatus is serverStatus with the sections Hourglass has: the
// process, connections, memory, operation counters, and metrics.ttl and
// metrics.cursor.
func cmdServerStatus(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	now := time.Now()
	host, _ := os.Hostname()
	up := now.Sub(s.started)
	s.mu.Lock()
	current := len(s.conns)
	s.mu.Unlock()
	var ttlSection bson.D
	if s.opts.TTL != nil {
		st := s.opts.TTL.Stats()
		ttlSection = bson.D{{Key: "deletedDocuments", Value: st.DeletedDocuments}, {Key: "deletedBuckets", Value: st.DeletedBuckets},
			{Key: "passes", Value: st.Passes}, {Key: "subPasses", Value: st.SubPasses}}
	} else {
		ttlSection = bson.D{{Key: "deletedDocuments", Value: int64(0)}, {Key: "deletedBuckets", Value: int64(0)},
			{Key: "passes", Value: int64(0)}, {Key: "subPasses", Value: int64(0)}}
	}
	oc := &s.opcounters
	return bson.D{
		{Key: "host", Value: host},
		{Key: "version", Value: serverVersion},
		{Key: "hourglassVersion", Value: s.opts.Version},
		{Key: "process", Value: "hourglass"},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: up.Seconds()},
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up / time.Second)},
		{Key: "localTime", Value: now},
		{Key: "connections", Value: bson.D{
			{Key: "current", Value: int32(current)},
			{Key: "available", Value: int32(max(s.opts.MaxConnections-current, 0))},
			{Key: "rejected", Value: s.refused.Load()},
			{Key: "totalCreated", Value: s.nextID.Load()},
		}},
		{Key: "mem", Value: memSection()},
		{Key: "opcounters", Value: bson.D{
			{Key: "insert", Value: oc.insert.Load()}, {Key: "query", Value: oc.query.Load()},
			{Key: "update", Value: oc.update.Load()}, {Key: "delete", Value: oc.delete.Load()},
			{Key: "getmore", Value: oc.getmore.Load()}, {Key: "command", Value: oc.command.Load()},
		}},
		{Key: "metrics", Value: bson.D{
			{Key: "ttl", Value: ttlSection},
			{Key: "cursor", Value: bson.D{
				{Key: "timedOut", Value: s.cursorsTimedOut.Load()},
				{Key: "open", Value: bson.D{{Key: "total", Value: int64(s.cursors.open())},
					{Key: "noTimeout", Value: int64(0)}, {Key: "pinned", Value: int64(0)}}},
			}},
		}},
	}, nil
}

// opcounters count the commands run, by serverStatus' kinds.
type opcounters struct {
	insert, query, update, delete, getmore, command atomic.Int64
}

func (oc *opcounters) count(name string) {
	switch name {
	case "insert":
		oc.insert.Add(1)
	case "find":
		oc.query.Add(1)
	case "update":
		oc.update.Add(1)
	case "delete":
		oc.delete.Add(1)
	case "getMore":
		oc.getmore.Add(1)
	default:
		oc.command.Add(1)
	}
}

// memSection is serverStatus' mem: resident and virtual sizes in MiB from
// /proc (supported false where there is none, as MongoDB reports it).
func memSection() bson.D {
	d := bson.D{{Key: "bits", Value: int32(64)}}
	if p, err := procfs.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil {
			return append(d, bson.E{Key: "resident", Value: int32(st.VmRSS >> 20)},
				bson.E{Key: "virtual", Value: int32(st.VmSize >> 20)}, bson.E{Key: "supported", Value: true})
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return append(d, bson.E{Key: "resident", Value: int32(0)}, bson.E{Key: "virtual", Value: int32(ms.Sys >> 20)},
		bson.E{Key: "supported", Value: false})
}

// cmdCurrentOp lists the commands this server is running and the TTL
// monitor's batch in progress, which MongoDB shows as a remove by
// "TTLMonitor". Fields other than $all and $ownOps filter the entries.
func cmdCurrentOp(s *Server, _ *conn, cmd *wireCommand) (bson.D, error) {
	if err := adminOnly(cmd); err != nil {
		return nil, err
	}
	args, err := cmd.args()
	if err != nil {
		return nil, err
	}
	delete(args, "$all")
	delete(args, "$ownOps")
	inprog := bson.A{}
	for _, e := range s.currentOps() {
		if err := matchArg(map[string]any{"filter": args}, "filter", e); err != nil {
			if errors.Is(err, errNoMatch) {
				continue
			}
			return nil, err
		}
		inprog = append(inprog, bson.Raw(mapDocument(e)))
	}
	return bson.D{{Key: "inprog", Value: inprog}}, nil
}

// currentOps are the entries of currentOp: the commands this server is
// running and the TTL monitor's batch in progress.
func (s *Server) currentOps() []map[string]any {
	host, _ := os.Hostname()
	now := time.Now()
	var entries []map[string]any
	for _, o := range s.cmd.Ops().List() {
		entries = append(entries, opEntry(host, o))
	}
	if s.opts.TTL != nil {
		if cur := s.opts.TTL.Current(); cur != nil {
			age := now.Sub(cur.Started)
			target := map[string]any{"collection": cur.Target.Collection}
			if cur.Target.Index != "" {
				target["index"] = cur.Target.Index
			}
			entries = append(entries, map[string]any{
				"type": "op", "host": host, "desc": "TTLMonitor", "active": true, "op": "remove",
				"ns": DatabaseName + "." + cur.Target.Collection, "secs_running": int64(age / time.Second),
				"microsecs_running": int64(age / time.Microsecond), "currentOpTime": cur.Started.UTC().Format(time.RFC3339Nano),
				"ttl": target,
			})
		}
	}
	return entries
}
