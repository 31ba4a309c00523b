package api_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
)

func TestAuth(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.AuthToken = "s3cret" })
	s.createSensors("s") // with the token
	anon := &testServer{t: t, url: s.url}
	s.mustDo(200, "GET", "/v1/collections", "")
	r := anon.mustDo(401, "GET", "/v1/collections", "")
	if c := r.errorCode(t); c != 18 {
		t.Fatalf("code %d, want 18", c)
	}
	anon.mustDo(401, "GET", "/v1/collections", "", "Authorization", "Bearer wrong")
	anon.mustDo(401, "GET", "/v1/status", "", "Authorization", "Token s3cret") // Token form is for line protocol only
	anon.mustDo(401, "GET", "/metrics", "")
	anon.mustDo(200, "GET", "/healthz", "")
	anon.mustDo(204, "GET", "/ping", "")
	anon.mustDo(200, "GET", "/v1/collections", "", "Authorization", "Bearer s3cret")

	line := "cpu,host=a usage=1 1714564800000000000\n"
	r = anon.mustDo(401, "POST", "/write?db=lp", line)
	if !strings.Contains(string(r.body), `"code":"unauthorized"`) {
		t.Fatalf("influx auth error body: %s", r.body)
	}
	anon.mustDo(204, "POST", "/write?db=lp", line, "Authorization", "Token s3cret")
	anon.mustDo(204, "POST", "/api/v2/write?bucket=lp", line, "Authorization", "Token s3cret")
	basic := base64.StdEncoding.EncodeToString([]byte("telegraf:s3cret"))
	anon.mustDo(204, "POST", "/write?db=lp", line, "Authorization", "Basic "+basic)
	anon.mustDo(204, "POST", "/write?db=lp&u=x&p=s3cret", line)
	anon.mustDo(401, "POST", "/write?db=lp&u=x&p=wrong", line)
	if n := s.count("lp"); n != 4 {
		t.Fatalf("count %d, want 4 (four accepted writes of one point are four measurements)", n)
	}
}

// slowBody is a request body that blocks until released.
type slowBody struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	data    io.Reader
}

// Release lets reads go on; it may be called more than once.
func (b *slowBody) Release() { b.once.Do(func() { close(b.release) }) }

func newSlowBody(data string) *slowBody {
	return &slowBody{started: make(chan struct{}), release: make(chan struct{}), data: strings.NewReader(data)}
}

func (b *slowBody) Read(p []byte) (int, error) {
	select {
	case <-b.started:
	default:
		close(b.started)
	}
	<-b.release
	return b.data.Read(p)
}

func TestBackPressureAndCurrentOp(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.MaxConcurrentWrites = 1; o.MaxQueuedWrites = -1 })
	s.createSensors("s")
	// The first insert takes the only slot and blocks reading its body.
	body := newSlowBody(sensorDocs)
	t.Cleanup(body.Release) // runs before the server's cleanup, so Close does not wait on it
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.url+"/v1/collections/s/documents", body)
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-body.started
	// The client has started sending the body; wait until the server's
	// handler has registered the op, however long a loaded machine takes.
	var ops []any
	for deadline := time.Now().Add(time.Minute); ; {
		r := s.mustDo(200, "GET", "/v1/currentop", "")
		ops = r.json(t)["inprog"].([]any)
		if len(ops) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // between polls, not for correctness
	}
	if len(ops) != 1 {
		t.Fatalf("currentop: %v", ops)
	}
	op := ops[0].(map[string]any)
	if op["op"] != "insert" || op["ns"] != "s" || op["microsecs_running"] == nil {
		t.Fatalf("op: %v", op)
	}
	// The slow body holds no slot: other writes go on.
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	s.mustDo(204, "POST", "/write?db=s", "cpu v=1")
	// With every slot taken by requests being stored, the next is refused.
	release := s.srv.HoldWriteSlots()
	r := s.mustDo(429, "POST", "/v1/collections/s/documents", sensorDocs)
	if r.header.Get("Retry-After") == "" || r.errorCode(t) != 462 {
		t.Fatalf("429 reply: %v %s", r.header, r.body)
	}
	r = s.mustDo(429, "POST", "/write?db=s", "cpu v=1")
	if r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "too many requests") {
		t.Fatalf("line-protocol 429 reply: %v %s", r.header, r.body)
	}
	release()
	body.Release()
	if st := <-done; st != 200 {
		t.Fatalf("slow insert status %d", st)
	}
	if n := s.count("s"); n != 4+4+1 {
		t.Fatalf("count %d, want 9", n)
	}
	r = s.mustDo(200, "GET", "/v1/currentop", "")
	if ops := r.json(t)["inprog"].([]any); len(ops) != 0 {
		t.Fatalf("currentop after: %v", ops)
	}
}

func TestStatusAndMetrics(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.Version = "v9.9.9" })
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	s.findRows("s", `{}`)
	s.mustDo(204, "POST", "/write?db=lp", "cpu,host=a usage=1,idle=2i 1714564800000000000\n")
	r := s.mustDo(200, "GET", "/v1/status", "")
	var st struct {
		Version    string           `json:"version"`
		Uptime     *int64           `json:"uptime"`
		Opcounters map[string]int64 `json:"opcounters"`
		Metrics    struct {
			Document map[string]int64 `json:"document"`
		} `json:"metrics"`
		Storage map[string]any `json:"storageEngine"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	var mem struct {
		Mem struct {
			Resident     int64 `json:"resident"`
			ResidentPeak int64 `json:"residentPeak"`
		} `json:"mem"`
	}
	if err := json.Unmarshal(r.body, &mem); err != nil || mem.Mem.Resident <= 0 || mem.Mem.ResidentPeak < mem.Mem.Resident {
		t.Fatalf("mem: %+v %v", mem, err)
	}
	if st.Version != "v9.9.9" || st.Uptime == nil || st.Opcounters["insert"] != 2 || st.Opcounters["query"] != 1 ||
		st.Metrics.Document["inserted"] != 5 || st.Metrics.Document["returned"] != 4 || st.Storage["measurements"].(float64) != 5 {
		t.Fatalf("status: %s", r.body)
	}
	s.mustDo(200, "POST", "/v1/collections/s/compact", "")
	r = s.mustDo(200, "GET", "/metrics", "")
	if m := regexp.MustCompile(`(?m)^hourglass_checkpoints_total (\d+)$`).FindSubmatch(r.body); m == nil || string(m[1]) == "0" {
		t.Errorf("/metrics: after a compaction, hourglass_checkpoints_total is %q; want at least 1", m)
	}
	for _, name := range []string{"hourglass_store_flushed_bytes_total", "hourglass_store_disk_bytes", "hourglass_store_read_amplification"} {
		if m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(r.body); m == nil || string(m[1]) == "0" {
			t.Errorf("/metrics: after a compaction, %s is %q; want more than 0", name, m)
		}
	}
	for _, want := range []string{
		"hourglass_buckets_sealed_for_memory_total 0",
		"hourglass_buckets_sealed_idle_total 0",
		"hourglass_buckets_merged_total",
		"hourglass_merge_marks_dropped_total 0",
		"hourglass_store_compacted_bytes_total",
		"hourglass_store_compactions_total",
		"hourglass_store_level0_files",
		"# TYPE hourglass_store_compactions_total counter",
		"# TYPE hourglass_store_disk_bytes gauge",
		"# TYPE hourglass_checkpoints_total counter",
		`hourglass_inserted_measurements_total{protocol="json"} 4`,
		`hourglass_inserted_measurements_total{protocol="line"} 1`,
		`hourglass_returned_measurements_total 4`,
		`hourglass_http_requests_total{code="200",method="POST",route="/v1/collections/{name}/documents"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestProfilerNeedsAuth(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.AuthToken = "s3cret" })
	anon := &testServer{t: t, url: s.url}
	anon.mustDo(401, "GET", "/debug/pprof/", "")
	r := s.mustDo(200, "GET", "/debug/pprof/goroutine?debug=1", "")
	if !strings.Contains(string(r.body), "goroutine profile") {
		t.Fatalf("profile: %.200s", r.body)
	}
}
