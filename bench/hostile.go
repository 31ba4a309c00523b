package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// HostileConfig configures RunHostile: the attacks of a hostile client run
// against a fresh server each, the findings of a hostile review kept as
// repeatable runs (docs/reliability.md, "The doors under attack").
type HostileConfig struct {
	// Binary is the hourglass executable run as the server.
	Binary string
	// Dir holds each scenario's data directory (removed after it).
	Dir string
	// Scenarios are the names of the scenarios to run (HostileScenarios);
	// empty: all of them.
	Scenarios []string
	// Progress, if set, receives a line per step.
	Progress func(string)
}

// HostileOutcome is one scenario's result: whether the server held, and
// the figures measured on the way.
type HostileOutcome struct {
	Name    string             `json:"name"`
	Held    bool               `json:"held"`
	Detail  string             `json:"detail"`
	Figures map[string]float64 `json:"figures,omitempty"`
}

// hostileScenario is an attack on a server started with flags.
type hostileScenario struct {
	name, what string
	flags      []string
	// tmpfs, if set, is the size of a tmpfs mounted on the scenario's
	// directory, which holds the data directory: a filesystem to fill.
	tmpfs int64
	run   func(ctx context.Context, h *hostileRun) (HostileOutcome, error)
}

// HostileScenarios names the scenarios RunHostile knows, with what each
// does.
func HostileScenarios() [][2]string {
	out := make([][2]string, len(hostileScenarios))
	for i, s := range hostileScenarios {
		out[i] = [2]string{s.name, s.what}
	}
	return out
}

var hostileScenarios = []hostileScenario{
	{name: "preauth", what: "100 clients that have not logged in announce 48 MB messages and send all but their last byte; the server's resident memory must not grow by more than 64 MiB, every such connection must be closed, and a client that logs in must still be served",
		flags: []string{"--auth-token", "hostile-token"}, run: hostilePreAuth},
	{name: "connections", what: "5,000 clients connect, say hello and stay idle against --mongo-max-connections 4000: the 1,000 past the limit must be closed at once, the server's resident memory per idle connection must stay under 32 KiB, and a new client must be served once idle ones leave",
		flags: []string{"--mongo-max-connections", "4000"}, run: hostileConnections},
	{name: "cursors", what: "a client opens 1,500 find cursors in time order with batchSize 1 over 4 connections on a collection of 20,000 series and leaves them open, holding the query memory (--query-memory-total 256MiB); another client's find over HTTP and count over the wire must still answer, and the hog's cursors past a connection's limit are refused",
		flags: []string{"--query-memory-total", "256MiB"}, run: hostileCursors},
	{name: "batchsize0", what: "find with batchSize 0 must answer an empty first batch and an open cursor, whose getMore reads the rest, as MongoDB does",
		run: hostileBatchSize0},
	{name: "memory", what: "1,000,000 series loaded over line protocol, then 200 clients at once send gzip line-protocol bodies of 8 MB each: the server's peak resident memory must stay within its documented total (docs/api.md: --memory-budget 256MiB + --max-body-memory + 256 MiB, plus 100 MiB per million series)",
		run: hostileMemory},
	{name: "million", what: "on a collection of 1,000,000 series: find with limit 1 (HTTP and wire), findOne, countDocuments({}) and distinct of a meta sub-field must each answer within the default query memory and under a second",
		run: hostileMillion},
	{name: "diskfull", what: "on a 96 MiB filesystem with a 40 MiB file on it (--memory-budget 48MiB, --disk-reserve 8MiB, --query-memory 8MiB), line protocol for 20,000 series is written until writes get 507; then a find of everything (HTTP, NDJSON) and countDocuments must answer with every acknowledged row, and once the 40 MiB file is removed writes must resume within 30 s without a restart and keep going for 20 more bodies",
		flags: []string{"--memory-budget", "48MiB", "--disk-reserve", "8MiB", "--query-memory", "8MiB"}, tmpfs: 96 << 20, run: hostileDiskFull},
	{name: "utf8", what: "strings and field names that are not UTF-8 sent over the wire (a time-series value, a meta value, a plain collection's field name, a command name) and JSON with lone surrogate escapes over HTTP: each refused (InvalidBSON 22, HTTP 400) with a reply that is valid BSON or JSON, and nothing stored",
		run: hostileUTF8},
}

// hostileRun is the server a scenario attacks.
type hostileRun struct {
	srv *ServerProcess
	// dir is the scenario's directory, which holds the data directory.
	dir      string
	progress func(string)
}

func (h *hostileRun) say(format string, args ...any) {
	if h.progress != nil {
		h.progress(fmt.Sprintf(format, args...))
	}
}

// RunHostile runs the scenarios in turn, each against a server of its own,
// and returns their outcomes. An error is a scenario that could not run;
// a scenario the server did not hold is an outcome with Held false.
func RunHostile(ctx context.Context, cfg HostileConfig) ([]HostileOutcome, error) {
	var out []HostileOutcome
	for _, name := range cfg.Scenarios {
		if !slices.ContainsFunc(hostileScenarios, func(s hostileScenario) bool { return s.name == name }) {
			return nil, fmt.Errorf("no hostile scenario %q", name)
		}
	}
	for _, sc := range hostileScenarios {
		if len(cfg.Scenarios) > 0 && !slices.Contains(cfg.Scenarios, sc.name) {
			continue
		}
		o, err := runHostileScenario(ctx, cfg, sc)
		if err != nil {
			return out, fmt.Errorf("%s: %w", sc.name, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func runHostileScenario(ctx context.Context, cfg HostileConfig, sc hostileScenario) (HostileOutcome, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "hostile-"+sc.name+"-")
	if err != nil {
		return HostileOutcome{}, err
	}
	defer os.RemoveAll(dir)
	if sc.tmpfs > 0 {
		unmount, err := mountTmpfs(dir, sc.tmpfs)
		if err != nil {
			return HostileOutcome{}, err
		}
		defer unmount()
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	srv, err := StartServer(sctx, cfg.Binary, filepath.Join(dir, "data"), sc.flags...)
	cancel()
	if err != nil {
		return HostileOutcome{}, err
	}
	defer srv.Kill()
	h := &hostileRun{srv: srv, dir: dir, progress: cfg.Progress}
	h.say("%s: server pid %d, HTTP %s, MongoDB %s", sc.name, srv.PID, srv.URL, srv.Mongo)
	o, err := sc.run(ctx, h)
	o.Name = sc.name
	if err == nil && srv.Exited() {
		o.Held, o.Detail = false, "the server exited: "+srv.Log(2<<10)
	}
	return o, err
}

const mib = 1 << 20

// hostilePreAuth: clients that have not authenticated announce large
// messages and trickle their bodies.
func hostilePreAuth(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const clients, announced = 100, 48000000
	rss0, _, err := ProcessMemory(h.srv.PID)
	if err != nil {
		return HostileOutcome{}, err
	}
	watch := WatchRSS(h.srv.PID, 50*time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	closed, sent := 0, int64(0)
	chunk := make([]byte, 256<<10)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", h.srv.Mongo)
			if err != nil {
				return
			}
			defer nc.Close()
			var hb [16]byte
			binary.LittleEndian.PutUint32(hb[0:], announced)
			binary.LittleEndian.PutUint32(hb[12:], uint32(wiremessage.OpMsg))
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			n, err := nc.Write(hb[:])
			left := announced - 16 - 1 // all but the last byte
			for err == nil && left > 0 {
				var m int
				m, err = nc.Write(chunk[:min(left, len(chunk))])
				n += m
				left -= m
			}
			mu.Lock()
			sent += int64(n)
			if err != nil && !isTimeoutErr(err) {
				closed++
			} else if serverClosed(nc) {
				closed++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	time.Sleep(time.Second)
	peak, _, err := watch.Stop()
	if err != nil {
		return HostileOutcome{}, err
	}
	rss1, _, err := ProcessMemory(h.srv.PID)
	if err != nil {
		return HostileOutcome{}, err
	}
	h.say("preauth: %d of %d connections closed by the server, %d MiB sent; RSS %d MiB before, peak %d MiB, %d MiB after",
		closed, clients, sent/mib, rss0/mib, peak/mib, rss1/mib)
	o := HostileOutcome{Figures: map[string]float64{"connections": clients, "closedByServer": float64(closed),
		"sentMiB": float64(sent) / mib, "rssBeforeMiB": float64(rss0) / mib, "rssPeakMiB": float64(peak) / mib, "rssAfterMiB": float64(rss1) / mib}}
	// A client that logs in is served.
	if err := loggedInPing(ctx, h.srv.Mongo, "hostile-token"); err != nil {
		o.Detail = "a client that logs in afterwards was not served: " + err.Error()
		return o, nil
	}
	switch {
	case closed != clients:
		o.Detail = fmt.Sprintf("%d of %d connections were left open", clients-closed, clients)
	case peak-rss0 > 64*mib:
		o.Detail = fmt.Sprintf("resident memory grew by %d MiB", (peak-rss0)/mib)
	default:
		o.Held = true
		o.Detail = fmt.Sprintf("every connection closed after %d KiB sent on average; RSS %d -> peak %d -> %d MiB",
			sent/clients/1024, rss0/mib, peak/mib, rss1/mib)
	}
	return o, nil
}

// hostileConnections: many idle connections, past the limit.
func hostileConnections(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const clients, limit = 5000, 4000
	rss0, _, err := ProcessMemory(h.srv.PID)
	if err != nil {
		return HostileOutcome{}, err
	}
	hello, _ := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			nc.Close()
		}
	}()
	refused := 0
	for range clients {
		nc, err := net.Dial("tcp", h.srv.Mongo)
		if err != nil {
			return HostileOutcome{}, err
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := (&wireConn{nc: nc}).roundTrip(hello); err != nil {
			refused++
			nc.Close()
			continue
		}
		open = append(open, nc)
	}
	time.Sleep(500 * time.Millisecond)
	rss1, _, err := ProcessMemory(h.srv.PID)
	if err != nil {
		return HostileOutcome{}, err
	}
	perConn := float64(rss1-rss0) / float64(len(open))
	for _, nc := range open[:10] {
		nc.Close()
	}
	open = open[10:]
	served := false
	for deadline := time.Now().Add(5 * time.Second); !served && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if nc, err := net.Dial("tcp", h.srv.Mongo); err == nil {
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = (&wireConn{nc: nc}).roundTrip(hello)
			served = err == nil
			nc.Close()
		}
	}
	o := HostileOutcome{Figures: map[string]float64{"clients": clients, "limit": limit, "open": float64(len(open) + 10),
		"refused": float64(refused), "rssBeforeMiB": float64(rss0) / mib, "rssIdleMiB": float64(rss1) / mib, "bytesPerIdleConnection": perConn}}
	h.say("connections: %d open, %d refused; RSS %d -> %d MiB, %.1f KiB per idle connection", len(open)+10, refused, rss0/mib, rss1/mib, perConn/1024)
	switch {
	case refused != clients-limit:
		o.Detail = fmt.Sprintf("%d connections refused, want %d", refused, clients-limit)
	case perConn > 32<<10:
		o.Detail = fmt.Sprintf("%.1f KiB of resident memory per idle connection", perConn/1024)
	case !served:
		o.Detail = "no new client was served after idle ones left"
	default:
		o.Held = true
		o.Detail = fmt.Sprintf("%d idle, %d refused at the limit; %.1f KiB of RSS per idle connection", limit, refused, perConn/1024)
	}
	return o, nil
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serverClosed reports whether the server closed nc (a read ends in EOF or
// a reset within a second).
func serverClosed(nc net.Conn) bool {
	nc.SetReadDeadline(time.Now().Add(time.Second))
	_, err := nc.Read(make([]byte, 1))
	return err != nil && !isTimeoutErr(err)
}

// loggedInPing logs in as hourglass with token over SCRAM-SHA-256, through
// the wire protocol, and runs a command that needs it.
func loggedInPing(ctx context.Context, addr, token string) error {
	cl, err := mongoConnect(ctx, "mongodb://hourglass:"+token+"@"+addr+"/?directConnection=true&serverSelectionTimeoutMS=5000")
	if err != nil {
		return err
	}
	defer cl.Disconnect(context.Background())
	_, err = cl.Database("test").ListCollectionNames(ctx, bson.D{})
	return err
}

// seriesLines loads n series of one point each as line protocol into db.
func seriesLines(url, db string, n int) error {
	var b strings.Builder
	t0 := time.Now().Add(-time.Hour).UnixNano()
	for i := range n {
		fmt.Fprintf(&b, "cpu,host=h%06d v=1 %d\n", i, t0+int64(i))
	}
	resp, err := http.Post(url+"/write?db="+db, "text/plain", strings.NewReader(b.String()))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("line protocol: %d %s", resp.StatusCode, body)
	}
	return nil
}

// hostileCursors: a client leaves many cursors open.
func hostileCursors(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const series, conns, perConn = 20000, 4, 375
	if err := seriesLines(h.srv.URL, "cur", series); err != nil {
		return HostileOutcome{}, err
	}
	opened, refused := 0, 0
	var firstRefusal string
	for range conns {
		cl, err := mongoConnect(ctx, "mongodb://"+h.srv.Mongo+"/?directConnection=true&maxPoolSize=1")
		if err != nil {
			return HostileOutcome{}, err
		}
		defer cl.Disconnect(context.Background())
		db := cl.Database("hourglass")
		for range perConn {
			// In time order: each cursor holds the plan of every series.
			err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "cur"}, {Key: "sort", Value: bson.D{{Key: "time", Value: 1}}},
				{Key: "batchSize", Value: 1}}).Err()
			if err != nil {
				refused++
				if firstRefusal == "" {
					firstRefusal = err.Error()
				}
				continue
			}
			opened++
		}
	}
	h.say("cursors: the hog opened %d cursors, %d refused (%s)", opened, refused, firstRefusal)
	start := time.Now()
	resp, err := http.Post(h.srv.URL+"/v1/collections/cur/find", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return HostileOutcome{}, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	httpTook := time.Since(start)
	cl, err := mongoConnect(ctx, "mongodb://"+h.srv.Mongo+"/?directConnection=true")
	if err != nil {
		return HostileOutcome{}, err
	}
	defer cl.Disconnect(context.Background())
	start = time.Now()
	n, cerr := cl.Database("hourglass").Collection("cur").CountDocuments(ctx, bson.D{})
	wireTook := time.Since(start)
	o := HostileOutcome{Figures: map[string]float64{"opened": float64(opened), "refused": float64(refused),
		"httpFindMillis": float64(httpTook.Milliseconds()), "wireCountMillis": float64(wireTook.Milliseconds())}}
	switch {
	case resp.StatusCode != 200:
		o.Detail = fmt.Sprintf("another client's HTTP find: %d %.200s", resp.StatusCode, body)
	case cerr != nil || n != series:
		o.Detail = fmt.Sprintf("another client's count: %d, %v", n, cerr)
	default:
		o.Held = true
		o.Detail = fmt.Sprintf("%d cursors left open (%d refused); another client's find took %s, its count %s", opened, refused,
			httpTook.Round(time.Millisecond), wireTook.Round(time.Millisecond))
	}
	h.say("cursors: %s", o.Detail)
	return o, nil
}

// hostileMemory: a million series, then a flood of gzip bodies.
func hostileMemory(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const series, flood, floodBytes = 1000000, 200, 8 << 20
	watch := WatchRSS(h.srv.PID, 100*time.Millisecond)
	if err := loadFleet(ctx, h.srv.URL, "fleet", series); err != nil {
		return HostileOutcome{}, err
	}
	time.Sleep(2 * time.Second)
	seriesRSS, _, err := ProcessMemory(h.srv.PID)
	if err != nil {
		return HostileOutcome{}, err
	}
	h.say("memory: %d series loaded, RSS %d MiB", series, seriesRSS/mib)
	// The flood: each body 8 MB of line protocol once decompressed.
	var body strings.Builder
	t0 := time.Now().Add(-30 * time.Minute).UnixNano()
	for i := 0; body.Len() < floodBytes; i++ {
		fmt.Fprintf(&body, "flood,host=h%03d usage=%d.5,idle=%di %d\n", i%100, i%97, i%89, t0+int64(i))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := postGzipStatus(ctx, h.srv.URL+"/write?db=flood", []byte(body.String()))
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	peak, hwm, err := watch.Stop()
	if err != nil {
		return HostileOutcome{}, err
	}
	total := int64(256<<20) + bodyMemoryDefault() + 256<<20 + series/1000000*seriesOverheadPerMillion
	o := HostileOutcome{Figures: map[string]float64{"seriesRSSMiB": float64(seriesRSS) / mib, "peakRSSMiB": float64(peak) / mib,
		"vmHWMMiB": float64(hwm) / mib, "documentedTotalMiB": float64(total) / mib}}
	h.say("memory: flood answers %v; peak RSS %d MiB (VmHWM %d MiB), documented total %d MiB", statuses, peak/mib, hwm/mib, total/mib)
	o.Detail = fmt.Sprintf("1M series: RSS %d MiB; with the flood (answers %v): peak %d MiB, VmHWM %d MiB; documented total %d MiB",
		seriesRSS/mib, statuses, peak/mib, hwm/mib, total/mib)
	o.Held = hwm <= total
	return o, nil
}

// seriesOverheadPerMillion is what docs/api.md adds to the process's total
// per million series: their own memory beyond what --memory-budget can
// shed (series stay in memory) and the line-protocol decoders' caches.
const seriesOverheadPerMillion = 100 << 20

// bodyMemoryDefault is serve's default --max-body-memory on this machine:
// --max-concurrent-writes (2 x CPUs) x --max-body (64 MiB).
func bodyMemoryDefault() int64 { return int64(2*runtime.GOMAXPROCS(0)) * 64 << 20 }

// postGzip posts body gzip-compressed and wants a 2xx.
func postGzip(ctx context.Context, url string, body []byte) error {
	st, err := postGzipStatus(ctx, url, body)
	if err == nil && st/100 != 2 {
		err = fmt.Errorf("status %d", st)
	}
	return err
}

func postGzipStatus(ctx context.Context, url string, body []byte) (int, error) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(body)
	zw.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", url, &zb)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// loadFleet loads series series of one point each into db over line
// protocol, 50,000 lines a body, gzip-compressed; tags sensor (one per
// series) and site (1,000 values).
func loadFleet(ctx context.Context, url, db string, series int) error {
	const batch = 50000
	t0 := time.Now().Add(-time.Hour).UnixNano()
	for from := 0; from < series; from += batch {
		var b strings.Builder
		for i := from; i < min(from+batch, series); i++ {
			fmt.Fprintf(&b, "m,sensor=s%07d,site=site%03d v=%d %d\n", i, i%1000, i, t0+int64(i))
		}
		if err := postGzip(ctx, url+"/write?db="+db, []byte(b.String())); err != nil {
			return fmt.Errorf("series %d: %w", from, err)
		}
	}
	return nil
}

// hostileMillion: reads on a million series.
func hostileMillion(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const series = 1000000
	if err := loadFleet(ctx, h.srv.URL, "card", series); err != nil {
		return HostileOutcome{}, err
	}
	cl, err := mongoConnect(ctx, "mongodb://"+h.srv.Mongo+"/?directConnection=true")
	if err != nil {
		return HostileOutcome{}, err
	}
	defer cl.Disconnect(context.Background())
	coll := cl.Database("hourglass").Collection("card")
	o := HostileOutcome{Held: true, Figures: map[string]float64{}}
	var failures []string
	try := func(name string, f func() error) {
		start := time.Now()
		err := f()
		took := time.Since(start)
		o.Figures[name+"Millis"] = float64(took.Microseconds()) / 1000
		h.say("million: %s took %s: %v", name, took.Round(time.Millisecond), err)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		case took > time.Second:
			failures = append(failures, fmt.Sprintf("%s took %s", name, took.Round(time.Millisecond)))
		}
	}
	try("httpFindLimit1", func() error {
		resp, err := http.Post(h.srv.URL+"/v1/collections/card/find", "application/json", strings.NewReader(`{"limit": 1}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || bytes.Count(b, []byte(`"time"`)) != 1 {
			return fmt.Errorf("%d %.200s", resp.StatusCode, b)
		}
		return nil
	})
	try("wireFindLimit1", func() error {
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetLimit(1))
		if err != nil {
			return err
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			return err
		}
		if len(docs) != 1 {
			return fmt.Errorf("%d documents", len(docs))
		}
		return nil
	})
	try("findOne", func() error { return coll.FindOne(ctx, bson.D{}).Err() })
	try("countDocuments", func() error {
		n, err := coll.CountDocuments(ctx, bson.D{})
		if err == nil && n != series {
			err = fmt.Errorf("counted %d", n)
		}
		return err
	})
	try("distinctSite", func() error {
		var sites []string
		err := coll.Distinct(ctx, "tags.site", bson.D{}).Decode(&sites)
		if err == nil && len(sites) != 1000 {
			err = fmt.Errorf("%d sites", len(sites))
		}
		return err
	})
	if len(failures) > 0 {
		o.Held, o.Detail = false, strings.Join(failures, "; ")
	} else {
		o.Detail = fmt.Sprintf("find limit 1 %.0f ms (HTTP) / %.0f ms (wire), findOne %.0f ms, countDocuments %.0f ms, distinct %.0f ms",
			o.Figures["httpFindLimit1Millis"], o.Figures["wireFindLimit1Millis"], o.Figures["findOneMillis"], o.Figures["countDocumentsMillis"], o.Figures["distinctSiteMillis"])
	}
	return o, nil
}

// hostileBatchSize0: find with batchSize 0.
func hostileBatchSize0(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	if err := seriesLines(h.srv.URL, "b0", 10); err != nil {
		return HostileOutcome{}, err
	}
	cl, err := mongoConnect(ctx, "mongodb://"+h.srv.Mongo+"/?directConnection=true")
	if err != nil {
		return HostileOutcome{}, err
	}
	defer cl.Disconnect(context.Background())
	db := cl.Database("hourglass")
	r, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "b0"}, {Key: "batchSize", Value: 0}}).Raw()
	if err != nil {
		return HostileOutcome{}, err
	}
	first, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	id := r.Lookup("cursor", "id").Int64()
	o := HostileOutcome{Figures: map[string]float64{"firstBatch": float64(len(first))}}
	if len(first) != 0 || id == 0 {
		o.Detail = fmt.Sprintf("batchSize 0 answered %d documents with cursor id %d, want none and an open cursor", len(first), id)
		return o, nil
	}
	r, err = db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "b0"}}).Raw()
	if err != nil {
		return HostileOutcome{}, err
	}
	next, _ := r.Lookup("cursor", "nextBatch").Array().Values()
	o.Figures["nextBatch"] = float64(len(next))
	if len(next) != 10 {
		o.Detail = fmt.Sprintf("the getMore after batchSize 0 answered %d documents of 10", len(next))
		return o, nil
	}
	o.Held, o.Detail = true, "an empty first batch and an open cursor, whose getMore read the 10 documents"
	h.say("batchsize0: %s", o.Detail)
	return o, nil
}

// hostileUTF8: invalid UTF-8 on both doors.
func hostileUTF8(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	nc, err := net.Dial("tcp", h.srv.Mongo)
	if err != nil {
		return HostileOutcome{}, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute))
	wc := &wireConn{nc: nc}
	for _, cmd := range []bson.D{
		{{Key: "create", Value: "ts"}, {Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}, {Key: "$db", Value: "test"}},
		{{Key: "create", Value: "plain"}, {Key: "$db", Value: "test"}},
	} {
		b, _ := bson.Marshal(cmd)
		if r, err := wc.roundTrip(b); err != nil || r.Lookup("ok").Double() != 1 {
			return HostileOutcome{}, fmt.Errorf("%s: %v %v", cmd[0].Key, r, err)
		}
	}
	at := time.Now().UnixMilli()
	insert := func(coll string, doc func([]byte) []byte) []byte {
		return buildDoc(func(d []byte) []byte {
			d = bsoncore.AppendStringElement(d, "insert", coll)
			a, d := bsoncore.AppendArrayElementStart(d, "documents")
			i, d := bsoncore.AppendDocumentElementStart(d, "0")
			d = doc(d)
			d, _ = bsoncore.AppendDocumentEnd(d, i)
			d, _ = bsoncore.AppendArrayEnd(d, a)
			return bsoncore.AppendStringElement(d, "$db", "test")
		})
	}
	attacks := []struct {
		name string
		cmd  []byte
	}{
		{"time-series string value", insert("ts", func(d []byte) []byte {
			return bsoncore.AppendStringElement(bsoncore.AppendDateTimeElement(d, "t", at), "s", "caf\xe9")
		})},
		{"meta value", insert("ts", func(d []byte) []byte {
			return bsoncore.AppendStringElement(bsoncore.AppendDateTimeElement(d, "t", at), "m", "\xff")
		})},
		{"plain field name", insert("plain", func(d []byte) []byte { return bsoncore.AppendInt32Element(d, "k\xc3", 1) })},
		{"command name", buildDoc(func(d []byte) []byte {
			return bsoncore.AppendStringElement(bsoncore.AppendInt32Element(d, "nosuch\xff", 1), "$db", "test")
		})},
	}
	o := HostileOutcome{Held: true, Figures: map[string]float64{}}
	var failures []string
	for _, a := range attacks {
		r, err := wc.roundTrip(a.cmd)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s: %v", a.name, err))
		case lookupInt(r, "code") != 22:
			failures = append(failures, fmt.Sprintf("%s: answered %v, want InvalidBSON (22)", a.name, r))
		}
	}
	for _, coll := range []string{"ts", "plain"} {
		b, _ := bson.Marshal(bson.D{{Key: "count", Value: coll}, {Key: "$db", Value: "test"}})
		r, err := wc.roundTrip(b)
		if err != nil {
			return o, err
		}
		if n := lookupInt(r, "n"); n != 0 {
			failures = append(failures, fmt.Sprintf("%s holds %d documents", coll, n))
		}
	}
	for _, body := range []string{`[{"t": {"$date": "2026-01-01T00:00:00Z"}, "m": "a\udc00", "v": 1}]`, "[{\"t\": {\"$date\": \"2026-01-01T00:00:00Z\"}, \"m\": \"a\xff\"}]"} {
		resp, err := http.Post(h.srv.URL+"/v1/collections/ts/documents", "application/json", strings.NewReader(body))
		if err != nil {
			return o, err
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !utf8.Valid(reply) {
			failures = append(failures, fmt.Sprintf("HTTP %q: %d %q, want 400", body, resp.StatusCode, reply))
		}
	}
	o.Figures["attacks"] = float64(len(attacks) + 2)
	o.Figures["failed"] = float64(len(failures))
	if len(failures) > 0 {
		o.Held, o.Detail = false, strings.Join(failures, "; ")
	} else {
		o.Detail = fmt.Sprintf("%d attacks refused with valid replies, nothing stored", len(attacks)+2)
	}
	h.say("utf8: %s", o.Detail)
	return o, nil
}

// lookupInt returns the integer at key in r, or -1 when there is none.
func lookupInt(r bson.Raw, key ...string) int64 {
	n, ok := r.Lookup(key...).AsInt64OK()
	if !ok {
		return -1
	}
	return n
}

// buildDoc builds a BSON document element by element, so that keys and
// strings can hold any bytes.
func buildDoc(build func([]byte) []byte) []byte {
	idx, d := bsoncore.AppendDocumentStart(nil)
	d = build(d)
	d, _ = bsoncore.AppendDocumentEnd(d, idx)
	return d
}

// wireConn sends raw OP_MSG commands and reads their replies.
type wireConn struct {
	nc net.Conn
	id int32
}

// roundTrip sends cmd and returns the reply's document, checked to be
// valid BSON whose keys and strings are UTF-8.
func (w *wireConn) roundTrip(cmd []byte) (bson.Raw, error) {
	w.id++
	idx, msg := wiremessage.AppendHeaderStart(nil, w.id, 0, wiremessage.OpMsg)
	msg = wiremessage.AppendMsgFlags(msg, 0)
	msg = wiremessage.AppendMsgSectionType(msg, wiremessage.SingleDocument)
	msg = append(msg, cmd...)
	msg = bsoncore.UpdateLength(msg, idx, int32(len(msg)))
	if _, err := w.nc.Write(msg); err != nil {
		return nil, err
	}
	var hb [16]byte
	if _, err := io.ReadFull(w.nc, hb[:]); err != nil {
		return nil, err
	}
	length, _, _, op, _, ok := wiremessage.ReadHeader(hb[:])
	if !ok || length < 16 || op != wiremessage.OpMsg {
		return nil, fmt.Errorf("reply header %x", hb)
	}
	body := make([]byte, length-16)
	if _, err := io.ReadFull(w.nc, body); err != nil {
		return nil, err
	}
	_, rem, _ := wiremessage.ReadMsgFlags(body)
	_, rem, _ = wiremessage.ReadMsgSectionType(rem)
	doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
	if !ok {
		return nil, errors.New("reply has no document")
	}
	if err := checkUTF8BSON(doc, 0); err != nil {
		return nil, fmt.Errorf("reply is not valid BSON with UTF-8 strings: %w", err)
	}
	return bson.Raw(doc), nil
}

// checkUTF8BSON checks doc's structure and that its keys and strings are
// UTF-8, at every depth.
func checkUTF8BSON(doc bsoncore.Document, depth int) error {
	if depth > 200 {
		return errors.New("nesting too deep")
	}
	if err := doc.Validate(); err != nil {
		return err
	}
	elems, err := doc.Elements()
	if err != nil {
		return err
	}
	for _, e := range elems {
		if !utf8.ValidString(e.Key()) {
			return fmt.Errorf("key %q", e.Key())
		}
		v := e.Value()
		switch v.Type {
		case bsoncore.TypeString:
			if !utf8.ValidString(v.StringValue()) {
				return fmt.Errorf("string of %q", e.Key())
			}
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if err := checkUTF8BSON(bsoncore.Document(v.Data), depth+1); err != nil {
				return fmt.Errorf("%s.%w", e.Key(), err)
			}
		}
	}
	return nil
}

// mongoConnect connects a MongoDB driver client to uri.
func mongoConnect(ctx context.Context, uri string) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI(uri))
}
