package mongoshtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/mongowire/mongowiretest"
	"github.com/hourglassdb/hourglass/timeseries"
)

// requireMongosh returns the path of the installed mongosh, and fails the
// test (skips it under -short) when node or the npm package is missing.
func requireMongosh(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("node")
	bin, _ := filepath.Abs(filepath.Join("node_modules", ".bin", "mongosh"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		const what = "node and mongosh in mongowire/mongoshtest/node_modules: run `make test`, which installs them, or `npm ci --prefix mongowire/mongoshtest`"
		if testing.Short() {
			t.Skipf("-short: skipping; missing: %s (%v)", what, err)
		}
		t.Fatalf("this test needs %s (%v); `go test -short` skips it", what, err)
	}
	return bin
}

// startServer serves a new engine on a loopback port; a non-empty
// authToken requires SCRAM-SHA-256 authentication with it.
func startServer(t *testing.T, authToken string) (*timeseries.DB, string) {
	return mongowiretest.Start(t, authToken)
}

// shell runs mongosh scripts against one server.
type shell struct {
	bin  string
	uri  string
	home string   // mongosh's home: its config and logs stay in the test's directory
	env  []string // HG_* variables the scripts read
}

// run runs testdata/<script> and returns the document it printed after
// "RESULT ", decoded from canonical Extended JSON. A script that throws,
// or prints no result, fails the test with mongosh's output.
func (sh *shell) run(t *testing.T, script string) bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh.bin, "--quiet", "--norc", sh.uri, "--file", filepath.Join("testdata", script))
	cmd.Env = append(os.Environ(), "HOME="+sh.home, "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1", "NO_COLOR=1")
	cmd.Env = append(cmd.Env, sh.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("mongosh %s: %v in %v", script, err, time.Since(start).Round(time.Millisecond))
	if stderr.Len() > 0 {
		t.Logf("mongosh %s, stderr:\n%s", script, stderr.Bytes())
	}
	var result bson.Raw
	for _, line := range strings.Split(stdout.String(), "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			if uerr := bson.UnmarshalExtJSON([]byte(j), true, &result); uerr != nil {
				t.Fatalf("mongosh %s printed a result that is not canonical Extended JSON: %v\n%s", script, uerr, j)
			}
		} else if strings.TrimSpace(line) != "" {
			t.Logf("mongosh %s: %s", script, line)
		}
	}
	if err != nil || result == nil {
		t.Fatalf("mongosh %s: %v, result %v; stdout:\n%s\nstderr:\n%s", script, err, result != nil, stdout.Bytes(), stderr.Bytes())
	}
	return result
}

// TestMongoshSession runs a sensor session in mongosh (testdata/session.js)
// against a mongowire.Server: a time-series collection created, 1000
// measurements of four sensors inserted with insertMany, two finds over a
// time range sorted by time through several getMore batches, the
// collections listed; then the commands of MongoDB's TTL documentation,
// counts, distinct, aggregate, deletes and updates (testdata/commands.js,
// every step checked); then the collection dropped (testdata/drop.js).
// Every value mongosh printed is checked against what was inserted, the
// batches against the batch sizes asked for, and the collection against
// the engine that serves the HTTP API. A proxy between mongosh and the
// server logs every command mongosh sent and how it was answered.
func TestMongoshSession(t *testing.T) {
	bin := requireMongosh(t)
	db, addr := startServer(t, "")
	wl := startWireLog(t, addr)

	const name, count = "weather", 1000
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	sh := &shell{bin: bin, uri: "mongodb://" + wl.addr() + "/test", home: t.TempDir(), env: []string{
		"HG_COLLECTION=" + name, "HG_T0_MS=" + strconv.FormatInt(t0.UnixMilli(), 10), "HG_COUNT=" + strconv.Itoa(count)}}

	res := sh.run(t, "session.js")
	logExchanges(t, "session.js", wl.exchanges())
	checkSession(t, res, wl.exchanges(), t0, name, count)

	// The engine behind the HTTP API holds the same collection.
	info, err := db.Describe(context.Background(), name)
	if err != nil {
		t.Fatalf("the engine does not find %q: %v", name, err)
	}
	if info.Count != count {
		t.Errorf("the engine counts %d measurements in %q, want %d", info.Count, name, count)
	}
	if ts := info.Options.TimeSeries; ts == nil || ts.TimeField != "ts" || ts.MetaField != "sensor" || ts.Granularity != "seconds" ||
		info.Options.ExpireAfterSeconds == nil || *info.Options.ExpireAfterSeconds != 86400 {
		t.Errorf("the engine's options for %q: %+v", name, info.Options)
	}

	// The rest of the session: every step checked.
	t.Run("commands", func(t *testing.T) {
		wl.reset()
		res := sh.run(t, "commands.js")
		logExchanges(t, "commands.js", wl.exchanges())
		checkCommands(t, res, t0, count)
	})

	wl.reset()
	res = sh.run(t, "drop.js")
	logExchanges(t, "drop.js", wl.exchanges())
	if v, ok := res.Lookup("drop").BooleanOK(); !ok || !v {
		t.Errorf("drop() returned %v, want true", res.Lookup("drop"))
	}
	if names := stringArray(t, res.Lookup("names")); len(names) != 0 {
		t.Errorf("getCollectionNames() after drop: %q, want none", names)
	}
	if _, err := db.DescribeShallow(context.Background(), name); mongoerr.CodeOf(err) != mongoerr.NamespaceNotFound {
		t.Errorf("the engine after drop: %v, want NamespaceNotFound", err)
	}
}

func logExchanges(t *testing.T, script string, log []*exchange) {
	t.Helper()
	var b strings.Builder
	for _, e := range log {
		b.WriteString("\n  ")
		b.WriteString(e.String())
	}
	t.Logf("commands mongosh sent for %s:%s", script, b.String())
}

// checkSession checks what testdata/session.js printed, and the batches
// its finds were answered in, against the measurements it inserted:
// measurement i is at t0 + i seconds, sensor i%4 of north, south, east,
// west, temp 20 + i/8, n = i.
func checkSession(t *testing.T, res bson.Raw, log []*exchange, t0 time.Time, name string, count int) {
	t.Helper()
	sensors := []string{"north", "south", "east", "west"}
	at := func(i int) bson.DateTime { return bson.NewDateTimeFromTime(t0.Add(time.Duration(i) * time.Second)) }

	if ok, _ := res.Lookup("create", "ok").AsFloat64OK(); ok != 1 {
		t.Errorf("createCollection returned %v, want ok: 1", res.Lookup("create"))
	}
	if ack, _ := res.Lookup("insert", "acknowledged").BooleanOK(); !ack {
		t.Errorf("insertMany was not acknowledged: %v", res.Lookup("insert"))
	}
	if n, _ := res.Lookup("insert", "ids").AsInt64OK(); n != int64(count) {
		t.Errorf("insertMany returned %d insertedIds, want %d", n, count)
	}

	// North over seconds [100, 900), newest first, projected on ts, sensor
	// and n.
	var want []bson.M
	for i := 899; i >= 100; i-- {
		if i%4 == 0 {
			want = append(want, bson.M{"ts": at(i), "sensor": "north", "n": int32(i)})
		}
	}
	checkDocs(t, "north", documents(t, res.Lookup("north")), want)

	// Everything, oldest first.
	want = want[:0]
	for i := range count {
		want = append(want, bson.M{"ts": at(i), "sensor": sensors[i%4], "temp": 20 + float64(i)/8, "n": int32(i)})
	}
	checkDocs(t, "all", documents(t, res.Lookup("all")), want)

	// The batches each find was answered in: what batchSize asked.
	batches := cursorBatches(t, log)
	if len(batches) != 2 {
		t.Fatalf("mongosh ran %d finds, want 2: %v", len(batches), batches)
	}
	checkBatches(t, "north", batches[0], 50, 200)
	checkBatches(t, "all", batches[1], 300, count)

	if names := stringArray(t, res.Lookup("names")); !slices.Equal(names, []string{name}) {
		t.Errorf("getCollectionNames() = %q, want [%q]", names, name)
	}
	var infos []struct {
		Name    string `bson:"name"`
		Type    string `bson:"type"`
		Options struct {
			TimeSeries struct {
				TimeField   string `bson:"timeField"`
				MetaField   string `bson:"metaField"`
				Granularity string `bson:"granularity"`
			} `bson:"timeseries"`
			ExpireAfterSeconds int64 `bson:"expireAfterSeconds"`
		} `bson:"options"`
	}
	if err := res.Lookup("infos").Unmarshal(&infos); err != nil {
		t.Fatalf("getCollectionInfos: %v", err)
	}
	if len(infos) != 1 {
		t.Fatalf("getCollectionInfos({name: %q}) returned %d collections, want 1: %v", name, len(infos), res.Lookup("infos"))
	}
	if i, o := infos[0], infos[0].Options; i.Name != name || i.Type != "timeseries" || o.TimeSeries.TimeField != "ts" ||
		o.TimeSeries.MetaField != "sensor" || o.TimeSeries.Granularity != "seconds" || o.ExpireAfterSeconds != 86400 {
		t.Errorf("getCollectionInfos({name: %q}) = %v, want a time-series collection on ts and sensor, granularity seconds, expireAfterSeconds 86400",
			name, res.Lookup("infos"))
	}
}

// checkDocs compares documents mongosh returned with those expected, field
// by field; numbers compare by value, since mongosh turns whole doubles
// into JavaScript numbers that print as integers.
func checkDocs(t *testing.T, what string, got, want []bson.M) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d documents, want %d", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		// Each measurement has the _id mongosh made for it.
		if _, isID := got[i]["_id"].(bson.ObjectID); isID && want[i]["_id"] == nil {
			delete(got[i], "_id")
		}
		if !sameDoc(got[i], want[i]) {
			t.Errorf("%s: document %d = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

func sameDoc(got, want bson.M) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		switch w := w.(type) {
		case float64:
			if number(g) != w {
				return false
			}
		case int32, int64:
			// NumberInt reads back as written, not as a Long.
			if g != w {
				return false
			}
		default:
			if g != w {
				return false
			}
		}
	}
	return true
}

// number is a BSON number's value, NaN for anything else.
func number(v any) float64 {
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return nan
}

var nan = func() float64 { var z float64; return z / z }()

// cursorBatches returns, for each find mongosh sent, the sizes of the
// batches of its cursor: the first batch, then every getMore's.
func cursorBatches(t *testing.T, log []*exchange) [][]int {
	t.Helper()
	var out [][]int
	byID := map[int64]int{} // cursor id -> index in out
	for _, e := range log {
		switch e.name {
		case "find", "getMore":
		default:
			continue
		}
		if !e.ok() {
			t.Errorf("%s was refused: %v", e.name, e)
			continue
		}
		key := "nextBatch"
		if e.name == "find" {
			key = "firstBatch"
		}
		arr, ok := e.reply.Lookup("cursor", key).ArrayOK()
		if !ok {
			t.Errorf("%s reply without cursor.%s: %v", e.name, key, e.reply)
			continue
		}
		vals, _ := arr.Values()
		id, _ := e.reply.Lookup("cursor", "id").AsInt64OK()
		if e.name == "find" {
			out = append(out, []int{len(vals)})
			if id != 0 {
				byID[id] = len(out) - 1
			}
			continue
		}
		asked, _ := e.body.Lookup("getMore").AsInt64OK()
		k, ok := byID[asked]
		if !ok {
			t.Errorf("getMore on cursor %d, which no find opened", asked)
			continue
		}
		out[k] = append(out[k], len(vals))
	}
	return out
}

// checkBatches checks that a cursor's batches hold total documents in
// batches of size, the last one shorter and an empty one allowed at the
// end (a cursor may learn it is exhausted only on the next getMore).
func checkBatches(t *testing.T, what string, got []int, size, total int) {
	t.Helper()
	var want []int
	for n := total; n > 0; n -= size {
		want = append(want, min(n, size))
	}
	if len(got) == len(want)+1 && got[len(got)-1] == 0 {
		got = got[:len(got)-1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: batches of %v documents, want %v (batchSize %d)", what, got, want, size)
	}
}

// documents decodes an array of documents.
func documents(t *testing.T, v bson.RawValue) []bson.M {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array of documents: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bson.M, len(vals))
	for i, x := range vals {
		if err := x.Unmarshal(&out[i]); err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
	}
	return out
}

func stringArray(t *testing.T, v bson.RawValue) []string {
	t.Helper()
	arr, ok := v.ArrayOK()
	if !ok {
		t.Fatalf("not an array of strings: %v", v)
	}
	vals, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, x := range vals {
		s, ok := x.StringValueOK()
		if !ok {
			t.Fatalf("not a string: %v", x)
		}
		out = append(out, s)
	}
	return out
}

func (e *exchange) Format(f fmt.State, verb rune) { fmt.Fprint(f, e.String()) }

// commandStep is a step of testdata/commands.js: what its value must be,
// and the steps it needs to have succeeded first.
type commandStep struct {
	name  string
	needs []string
	// check returns what is wrong with the step's value; nil for a step
	// that must fail (wantErr).
	check func(v bson.RawValue) error
	// wantErr: the step must be refused with a message holding this.
	wantErr string
}

// checkCommands checks what testdata/commands.js printed. Every step must
// pass; a step that needs one that failed is reported, not checked.
func checkCommands(t *testing.T, res bson.Raw, t0 time.Time, count int) {
	t.Helper()
	north := count / 4
	steps := []commandStep{
		{name: "countNorth", check: equalNumber(float64(north))},
		{name: "estimatedCount", check: equalNumber(float64(count))},
		{name: "distinct", check: func(v bson.RawValue) error {
			var got []string
			if err := v.Unmarshal(&got); err != nil {
				return err
			}
			sort.Strings(got)
			if want := []string{"east", "north", "south", "west"}; !slices.Equal(got, want) {
				return fmt.Errorf("got %q, want %q", got, want)
			}
			return nil
		}},
		{name: "perMinute", check: func(v bson.RawValue) error {
			type group struct {
				ID  time.Time `bson:"_id"`
				N   int64     `bson:"n"`
				Avg float64   `bson:"avg"`
			}
			var got []group
			if err := v.Unmarshal(&got); err != nil {
				return err
			}
			// North is every 4th second from t0 (on a minute).
			var want []group
			sums := map[int]float64{}
			for i := 0; i < count; i += 4 {
				m := i / 60
				if len(want) == m {
					want = append(want, group{ID: t0.Add(time.Duration(m) * time.Minute)})
				}
				want[m].N++
				sums[m] += 20 + float64(i)/8
			}
			for m := range want {
				want[m].Avg = sums[m] / float64(want[m].N)
			}
			if len(got) != len(want) {
				return fmt.Errorf("%d groups, want %d: %+v", len(got), len(want), got)
			}
			for i := range want {
				if !got[i].ID.Equal(want[i].ID) || got[i].N != want[i].N || got[i].Avg != want[i].Avg {
					return fmt.Errorf("group %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			return nil
		}},
		{name: "createIndex", check: equalString("east_hour")},
		{name: "getIndexes", needs: []string{"createIndex"}, check: hasTTLIndex("east_hour", 3600)},
		{name: "collMod", needs: []string{"createIndex"}, check: func(v bson.RawValue) error {
			old, _ := v.Document().Lookup("expireAfterSeconds_old").AsInt64OK()
			now, _ := v.Document().Lookup("expireAfterSeconds_new").AsInt64OK()
			if old != 3600 || now != 7200 {
				return fmt.Errorf("got %v, want expireAfterSeconds_old 3600, expireAfterSeconds_new 7200", v)
			}
			return nil
		}},
		{name: "getIndexesAfterCollMod", needs: []string{"collMod"}, check: hasTTLIndex("east_hour", 7200)},
		{name: "createIndexThirdArgument", wantErr: "expireAfterSeconds"},
		{name: "dropIndex", needs: []string{"createIndex"}, check: okReply},
		{name: "ttlMetrics", check: func(v bson.RawValue) error {
			for _, k := range []string{"deletedDocuments", "passes"} {
				if _, ok := v.Document().Lookup(k).AsInt64OK(); !ok {
					return fmt.Errorf("no number %s in %v", k, v)
				}
			}
			return nil
		}},
		{name: "currentOp", check: func(v bson.RawValue) error {
			if _, ok := v.ArrayOK(); !ok {
				return fmt.Errorf("inprog is not an array: %v", v)
			}
			return nil
		}},
		{name: "setParameter", check: func(v bson.RawValue) error {
			if was, ok := v.Document().Lookup("was").BooleanOK(); !ok || !was {
				return fmt.Errorf("got %v, want was: true", v)
			}
			return nil
		}},
		{name: "getParameter", needs: []string{"setParameter"}, check: func(v bson.RawValue) error {
			if on, ok := v.Document().Lookup("ttlMonitorEnabled").BooleanOK(); !ok || on {
				return fmt.Errorf("got %v, want ttlMonitorEnabled: false", v)
			}
			return nil
		}},
		{name: "setParameterBack", needs: []string{"setParameter"}, check: okReply},
		{name: "deleteWest", check: field("deletedCount", float64(north))},
		{name: "countAfterDelete", needs: []string{"deleteWest"}, check: equalNumber(float64(count - north))},
		{name: "updateOne", check: func(v bson.RawValue) error {
			if err := field("matchedCount", 1)(v); err != nil {
				return err
			}
			return field("modifiedCount", 1)(v)
		}},
		{name: "afterUpdate", needs: []string{"updateOne"}, check: func(v bson.RawValue) error {
			var got []struct {
				ID     int64  `bson:"_id"`
				Status string `bson:"status"`
			}
			if err := v.Unmarshal(&got); err != nil {
				return err
			}
			if len(got) != 1 || got[0].ID != 1 || got[0].Status != "closed" {
				return fmt.Errorf("got %v, want ticket 1 closed", v)
			}
			return nil
		}},
		{name: "deleteOne", check: field("deletedCount", 1)},
		{name: "ticketsCount", needs: []string{"deleteOne"}, check: equalNumber(2)},
		{name: "ticketsTTL", check: equalString("lastModifiedDate_1")},
	}

	passed := map[string]bool{}
	for _, s := range steps {
		r, err := res.LookupErr(s.name)
		if err != nil {
			t.Errorf("commands.js printed no %s", s.name)
			continue
		}
		doc := r.Document()
		ok, _ := doc.Lookup("ok").AsInt64OK()
		code, _ := doc.Lookup("code").AsInt64OK()
		msg, _ := doc.Lookup("errmsg").StringValueOK()
		blocked := false
		for _, n := range s.needs {
			blocked = blocked || !passed[n]
		}
		switch {
		case blocked:
			t.Logf("%s: not checked, it needs %q", s.name, s.needs)
		case s.wantErr != "":
			if ok == 1 || !strings.Contains(msg, s.wantErr) {
				t.Errorf("%s: %v, want an error that names %s", s.name, doc, s.wantErr)
			}
		case ok != 1:
			t.Errorf("%s: refused: code %d %q", s.name, code, msg)
		default:
			if err := s.check(doc.Lookup("value")); err != nil {
				t.Errorf("%s: %v", s.name, err)
			} else {
				passed[s.name] = true
			}
		}
	}
}

func equalNumber(want float64) func(bson.RawValue) error {
	return func(v bson.RawValue) error {
		if got, ok := v.AsFloat64OK(); !ok || got != want {
			return fmt.Errorf("got %v, want %v", v, want)
		}
		return nil
	}
}

func equalString(want string) func(bson.RawValue) error {
	return func(v bson.RawValue) error {
		if got, ok := v.StringValueOK(); !ok || got != want {
			return fmt.Errorf("got %v, want %q", v, want)
		}
		return nil
	}
}

func field(name string, want float64) func(bson.RawValue) error {
	return func(v bson.RawValue) error {
		d, ok := v.DocumentOK()
		if !ok {
			return fmt.Errorf("got %v, want a document with %s", v, name)
		}
		return equalNumber(want)(d.Lookup(name))
	}
}

func okReply(v bson.RawValue) error { return field("ok", 1)(v) }

// hasTTLIndex checks a getIndexes answer for the index name expiring after
// secs seconds, with its partial filter on sensor east.
func hasTTLIndex(name string, secs int64) func(bson.RawValue) error {
	return func(v bson.RawValue) error {
		var idx []struct {
			Name    string `bson:"name"`
			Key     bson.D `bson:"key"`
			Expire  *int64 `bson:"expireAfterSeconds"`
			Partial bson.D `bson:"partialFilterExpression"`
		}
		if err := v.Unmarshal(&idx); err != nil {
			return err
		}
		for _, x := range idx {
			if x.Name != name {
				continue
			}
			if x.Expire == nil || *x.Expire != secs || len(x.Key) != 1 || x.Key[0].Key != "ts" || len(x.Partial) != 1 || x.Partial[0].Key != "sensor" {
				return fmt.Errorf("index %s = %+v, want key ts, expireAfterSeconds %d, a partial filter on sensor", name, x, secs)
			}
			return nil
		}
		return fmt.Errorf("no index %s in %v", name, v)
	}
}

// exchange is one command a client sent and the server's reply.
type exchange struct {
	name  string   // the command, the first key of its document
	db    string   // $db, or the OP_QUERY namespace's database
	op    string   // OP_MSG or OP_QUERY
	body  bson.Raw // the command document
	reply bson.Raw // nil until answered (or never, with moreToCome)
}

// ok reports whether the reply says ok: 1.
func (e *exchange) ok() bool {
	if e.reply == nil {
		return false
	}
	v, err := e.reply.LookupErr("ok")
	if err != nil {
		return false
	}
	f, ok := v.AsFloat64OK()
	return ok && f == 1
}

// code is the reply's error code, 0 when it has none.
func (e *exchange) code() int32 {
	if e.reply == nil {
		return 0
	}
	v, err := e.reply.LookupErr("code")
	if err != nil {
		return 0
	}
	c, _ := v.Int32OK()
	return c
}

func (e *exchange) String() string {
	switch {
	case e.reply == nil:
		return fmt.Sprintf("%s %s.%s: no reply", e.op, e.db, e.name)
	case e.ok():
		return fmt.Sprintf("%s %s.%s: ok", e.op, e.db, e.name)
	}
	msg, _ := e.reply.Lookup("errmsg").StringValueOK()
	body := e.body.String()
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	return fmt.Sprintf("%s %s.%s: code %d %q; sent %s", e.op, e.db, e.name, e.code(), msg, body)
}

// wireLog is a loopback proxy in front of a server that records the
// commands passing through it and their replies: what a client asks, at
// start-up and for each of its helpers, and how it was answered.
type wireLog struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	log     []*exchange
	pending map[int32]*exchange // by request id
	conns   map[net.Conn]struct{}
}

// startWireLog listens on a loopback port and forwards every connection to
// target; it stops when the test ends.
func startWireLog(t *testing.T, target string) *wireLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireLog{ln: ln, target: target, pending: map[int32]*exchange{}, conns: map[net.Conn]struct{}{}}
	w.wg.Add(1)
	go w.accept()
	t.Cleanup(func() {
		ln.Close()
		w.mu.Lock()
		for c := range w.conns {
			c.Close()
		}
		w.mu.Unlock()
		w.wg.Wait()
	})
	return w
}

func (w *wireLog) addr() string { return w.ln.Addr().String() }

func (w *wireLog) accept() {
	defer w.wg.Done()
	for {
		client, err := w.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.target)
		if err != nil {
			client.Close()
			continue
		}
		w.mu.Lock()
		w.conns[client], w.conns[server] = struct{}{}, struct{}{}
		w.mu.Unlock()
		w.wg.Add(2)
		go w.pump(client, server, w.request)
		go w.pump(server, client, w.reply)
	}
}

// pump copies whole messages from src to dst, showing each to record,
// until either side closes.
func (w *wireLog) pump(src, dst net.Conn, record func([]byte)) {
	defer w.wg.Done()
	defer src.Close()
	defer dst.Close()
	for {
		var head [4]byte
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(head[:]))
		if n < 16 || n > 48_000_000 {
			return
		}
		msg := make([]byte, n)
		copy(msg, head[:])
		if _, err := io.ReadFull(src, msg[4:]); err != nil {
			return
		}
		record(msg)
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

func (w *wireLog) request(msg []byte) {
	_, id, _, opcode, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return
	}
	e := &exchange{op: opcode.String()}
	switch opcode {
	case wiremessage.OpMsg:
		doc, err := msgBody(rem)
		if err != nil {
			e.name = "(" + err.Error() + ")"
			break
		}
		e.body = bson.Raw(doc)
		e.db, _ = doc.Lookup("$db").StringValueOK()
	case wiremessage.OpQuery:
		_, rem, ok = wiremessage.ReadQueryFlags(rem)
		var ns string
		if ok {
			ns, rem, ok = wiremessage.ReadQueryFullCollectionName(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadQueryNumberToSkip(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadQueryNumberToReturn(rem)
		}
		var doc bsoncore.Document
		if ok {
			doc, _, ok = wiremessage.ReadQueryQuery(rem)
		}
		if ok {
			e.body = bson.Raw(doc)
			e.db, _, _ = strings.Cut(ns, ".")
		}
	}
	if e.body != nil {
		if el, err := e.body.IndexErr(0); err == nil {
			e.name = el.Key()
			if e.name == "$query" { // OP_QUERY's wrapped form
				if d, ok := el.Value().DocumentOK(); ok {
					if el, err := d.IndexErr(0); err == nil {
						e.name = el.Key()
					}
				}
			}
		}
	} else if e.name == "" {
		e.name = "(undecoded)"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, e)
	w.pending[id] = e
}

func (w *wireLog) reply(msg []byte) {
	_, _, to, opcode, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return
	}
	var doc bsoncore.Document
	switch opcode {
	case wiremessage.OpMsg:
		doc, _ = msgBody(rem)
	case wiremessage.OpReply:
		_, rem, ok = wiremessage.ReadReplyFlags(rem)
		if ok {
			_, rem, ok = wiremessage.ReadReplyCursorID(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadReplyStartingFrom(rem)
		}
		if ok {
			_, rem, ok = wiremessage.ReadReplyNumberReturned(rem)
		}
		if ok {
			doc, _, _ = wiremessage.ReadReplyDocument(rem)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.pending[to]; e != nil {
		e.reply = bson.Raw(doc)
		delete(w.pending, to)
	}
}

// msgBody is the kind-0 section of an OP_MSG after its header.
func msgBody(rem []byte) (bsoncore.Document, error) {
	flags, rem, ok := wiremessage.ReadMsgFlags(rem)
	if !ok {
		return nil, errors.New("short OP_MSG")
	}
	if flags&wiremessage.ChecksumPresent != 0 && len(rem) >= 4 {
		rem = rem[:len(rem)-4]
	}
	for len(rem) > 0 {
		var stype wiremessage.SectionType
		stype, rem, ok = wiremessage.ReadMsgSectionType(rem)
		if !ok {
			break
		}
		switch stype {
		case wiremessage.SingleDocument:
			doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
			if !ok {
				return nil, errors.New("bad OP_MSG body")
			}
			return doc, nil
		case wiremessage.DocumentSequence:
			_, _, rem, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rem)
			if !ok {
				return nil, errors.New("bad OP_MSG document sequence")
			}
		default:
			return nil, fmt.Errorf("OP_MSG section kind %d", stype)
		}
	}
	return nil, errors.New("OP_MSG without a body")
}

// exchanges returns a copy of what was recorded so far.
func (w *wireLog) exchanges() []*exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*exchange(nil), w.log...)
}

// reset forgets what was recorded.
func (w *wireLog) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = nil
}

// TestMongoshAuthentication connects mongosh to a server with an auth
// token: as hourglass with the token it runs commands that need
// authentication; with a wrong password it fails to connect, saying so.
func TestMongoshAuthentication(t *testing.T) {
	bin := requireMongosh(t)
	_, addr := startServer(t, "t0ken")
	sh := &shell{bin: bin, uri: "mongodb://hourglass:t0ken@" + addr + "/test", home: t.TempDir()}
	res := sh.run(t, "auth.js")
	if user, _ := res.Lookup("users", "0", "user").StringValueOK(); user != "hourglass" {
		t.Errorf("connectionStatus' authenticatedUsers = %v, want hourglass", res.Lookup("users"))
	}
	if names := stringArray(t, res.Lookup("names")); len(names) != 1 || names[0] != "authed" {
		t.Errorf("getCollectionNames() = %q, want [authed]", names)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--quiet", "--norc", "mongodb://hourglass:wrong@"+addr+"/test", "--eval", "db.getCollectionNames()")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Authentication failed") {
		t.Errorf("mongosh with a wrong password: %v, output:\n%s", err, out)
	}
}

// TestMongoshFidelity: mongosh reads a plain document back as it wrote it
// (testdata/fidelity.js): its field order at every depth, 7 an int32 and
// Long('7') an int64, NumberDecimal('1.10') exactly, binary data, and the
// same after an update that adds a field and increments one; meta values
// of a time series with their types, an int32 inside a sub-document too.
func TestMongoshFidelity(t *testing.T) {
	bin := requireMongosh(t)
	_, addr := startServer(t, "")
	sh := &shell{bin: bin, uri: "mongodb://" + addr + "/test", home: t.TempDir()}
	res := sh.run(t, "fidelity.js")
	keys := func(path ...string) string {
		d, ok := res.Lookup(path...).DocumentOK()
		if !ok {
			t.Fatalf("%v is not a document in %s", path, res)
		}
		els, _ := d.Elements()
		var ks []string
		for _, e := range els {
			ks = append(ks, e.Key())
		}
		return strings.Join(ks, ",")
	}
	for _, c := range []struct{ got, want string }{
		{keys("read"), "_id,zeta,alpha,dec,bin,mid"},
		{keys("read", "mid"), "z,a"},
		{keys("read", "mid", "a", "1"), "y,b"},
		{keys("updated"), "_id,zeta,alpha,dec,bin,mid,new"},
		{res.Lookup("read", "zeta").Type.String(), "32-bit integer"},
		{res.Lookup("read", "alpha").Type.String(), "64-bit integer"},
		{res.Lookup("read", "dec").String(), `{"$numberDecimal":"1.10"}`},
		{res.Lookup("read", "bin").String(), `{"$binary":{"base64":"AAE=","subType":"00"}}`},
		{res.Lookup("updated", "zeta").String(), `{"$numberInt":"8"}`},
		{res.Lookup("updated", "alpha").String(), `{"$numberLong":"8"}`},
		// mongosh's driver adds the _id it makes after the fields.
		{keys("ts"), "t,s,zeta,alpha,dec,bin,mid,nul,_id"},
		{res.Lookup("ts", "nul").Type.String(), "null"},
		{keys("ts", "mid"), "z,a"},
		{keys("ts", "mid", "a", "1"), "y,b"},
		{res.Lookup("ts", "_id").Type.String(), "objectID"},
		{res.Lookup("ts", "zeta").Type.String(), "32-bit integer"},
		{res.Lookup("ts", "alpha").Type.String(), "64-bit integer"},
		{res.Lookup("ts", "dec").String(), `{"$numberDecimal":"1.10"}`},
		{res.Lookup("ts", "bin").String(), `{"$binary":{"base64":"AAE=","subType":"00"}}`},
		{res.Lookup("tsById").String(), `{"$numberInt":"1"}`},
		// The meta values, an int32 within a sub-document too.
		{res.Lookup("metas", "0").String(), `{"sensorId": {"$numberInt":"5578"},"type": "temperature"}`},
		{res.Lookup("metas", "1").String(), `{"$numberLong":"5578"}`},
		{res.Lookup("metas", "2").String(), `{"$oid":"650102030405060708090a0b"}`},
		{res.Lookup("metas", "3").String(), `{"$numberDecimal":"1.10"}`},
		{res.Lookup("metaIds").String(), `{"$numberInt":"1"}`},
	} {
		if c.got != c.want {
			t.Errorf("read back %s, want %s", c.got, c.want)
		}
	}
}
