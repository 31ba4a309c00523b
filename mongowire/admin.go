package mongowire

import (
	"errors"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/prometheus/procfs"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// op is a command in progress, listed by currentOp.
type op struct {
	id     int64
	conn   *conn
	kind   string // MongoDB's op: command, query, getmore, insert, update, remove
	ns     string
	cmd    bsoncore.Document // the request's body, which the request owns while op is listed
	start  time.Time
	client string
}

// opRegistry holds the commands in progress of a server's connections.
type opRegistry struct {
	next atomic.Int64
	mu   sync.Mutex // guards ops
	ops  map[int64]*op
}

func newOpRegistry() *opRegistry { return &opRegistry{ops: map[int64]*op{}} }

// opKinds are currentOp's op of the commands that are not "command".
var opKinds = map[string]string{"find": "query", "getMore": "getmore", "insert": "insert",
	"update": "update", "delete": "remove", "count": "command", "distinct": "command"}

func (r *opRegistry) begin(c *conn, cmd *wireCommand) *op {
	kind := opKinds[cmd.name]
	if kind == "" {
		kind = "command"
	}
	ns := cmd.db + ".$cmd"
	if v, err := cmd.body.LookupErr(cmd.name); err == nil {
		if coll, ok := v.StringValueOK(); ok {
			ns = cmd.db + "." + coll
		}
	}
	o := &op{id: r.next.Add(1), conn: c, kind: kind, ns: ns, cmd: cmd.body, start: time.Now(), client: c.nc.RemoteAddr().String()}
	r.mu.Lock()
	r.ops[o.id] = o
	r.mu.Unlock()
	return o
}

func (r *opRegistry) end(o *op) {
	r.mu.Lock()
	delete(r.ops, o.id)
	r.mu.Unlock()
}

// entries describes the ops in progress as currentOp's inprog does, by
// opid.
func (r *opRegistry) entries(host string, now time.Time) []map[string]any {
	r.mu.Lock()
	out := make([]map[string]any, 0, len(r.ops))
	for _, o := range r.ops {
		// The command as sent, but for values the engine's value set lacks
		// (the session id is a binary UUID).
		cmd := map[string]any{}
		model.EachBSONElement(o.cmd, func(k string, v bsoncore.Value) error {
			if x, err := model.ValueFromBSON(k, v, 0); err == nil {
				cmd[k] = x
			}
			return nil
		})
		age := now.Sub(o.start)
		out = append(out, map[string]any{
			"type": "op", "host": host, "desc": "conn" + string(itoa(nil, int(o.conn.id))),
			"connectionId": o.conn.id, "client": o.client, "active": true, "opid": o.id,
			"secs_running": int64(age / time.Second), "microsecs_running": int64(age / time.Microsecond),
			"op": o.kind, "ns": o.ns, "command": cmd, "currentOpTime": o.start.UTC().Format(time.RFC3339Nano),
		})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i]["opid"].(int64) < out[j]["opid"].(int64) })
	return out
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
	entries := s.ops.entries(host, now)
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
