package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/internal/tmpfs"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestDiskFull runs the server on a data directory on an 8 MiB tmpfs. With
// less than the reserve free, inserts (JSON, line protocol) are answered
// 507 OutOfDiskSpace (14031) with Retry-After, finds, describe and status
// answer 200 with every acknowledged write, and once space is freed inserts
// are accepted again without a restart.
func TestDiskFull(t *testing.T) {
	root := tmpfs.Mount(t, 8<<20)
	db, err := timeseries.Open(timeseries.Options{Dir: filepath.Join(root, "data"), DiskReserve: 2 << 20,
		CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := serveDB(t, db, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)

	fill := filepath.Join(root, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	fi, _ := f.Stat()
	if err := f.Truncate(fi.Size() - 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, req := range [][]string{
		{"/v1/collections/s/documents", `[{"timestamp": "2024-05-01T13:00:00Z", "sensor": "d", "temp": 1}]`, "application/json"},
		{"/write?db=telegraf&precision=s", "cpu,host=a v=1 1714568400\n", "text/plain"},
	} {
		r := s.do("POST", req[0], []byte(req[1]), "Content-Type", req[2])
		if r.status != 507 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "disk space in "+root) {
			t.Fatalf("POST %s on a full disk: %d %v %s", req[0], r.status, r.header, r.body)
		}
		if req[2] == "application/json" {
			if e := r.json(t)["error"].(map[string]any); e["code"] != 14031.0 || e["codeName"] != "OutOfDiskSpace" {
				t.Fatalf("error %v, want 14031 OutOfDiskSpace", e)
			}
		}
	}
	if n := s.count("s"); n != 4 {
		t.Fatalf("count on a full disk %d, want 4", n)
	}
	if rows := s.findRows("s", `{}`); len(rows) != 4 {
		t.Fatalf("find on a full disk: %d rows, want 4", len(rows))
	}
	s.mustDo(200, "GET", "/v1/status", "")

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", `[{"timestamp": "2024-05-01T13:00:00Z", "sensor": "d", "temp": 1}]`)
	if n := s.count("s"); n != 5 {
		t.Fatalf("count after space was freed %d, want 5", n)
	}
}

// TestDiskFullMidBody sends a line-protocol body of several chunks to a
// store with room for only the first few: the reply is 507 with
// Retry-After, naming the first line not written, and what the message
// says was written is what the collection holds. A body refused before
// anything was stored names no line.
func TestDiskFullMidBody(t *testing.T) {
	root := tmpfs.Mount(t, 8<<20)
	db, err := timeseries.Open(timeseries.Options{Dir: filepath.Join(root, "data"), DiskReserve: 2 << 20,
		CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := serveDB(t, db, nil)
	s.mustDo(204, "POST", "/write?db=lp&precision=s", "m,host=a v=1 1714564800\n")

	// Leave the reserve and 600 KiB: room for a few chunks of the body's
	// log records, not all.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(root, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if err := os.WriteFile(filepath.Join(root, "fill"), make([]byte, free-(2<<20+600<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	lines := 0
	for b.Len() < 4<<20 {
		lines++
		fmt.Fprintf(&b, "m,host=h%d v=%v %d\n", lines%20, rng.Float64(), 1714564800+lines)
	}
	r := s.do("POST", "/write?db=lp&precision=s", []byte(b.String()))
	var e struct {
		Message string `json:"message"`
		Line    int    `json:"line"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != 507 || r.header.Get("Retry-After") == "" {
		t.Fatalf("a body larger than the room left: %d %v %s", r.status, r.header, r.body)
	}
	var last, wrote int
	_, tail, _ := strings.Cut(e.Message, "; lines 1 to ")
	if _, err := fmt.Sscanf(tail, "%d of the body were written (%d measurements)", &last, &wrote); err != nil ||
		e.Line != last+1 || last < 1 || last >= lines {
		t.Fatalf("reply %s: want the lines written named (%v)", r.body, err)
	}
	if n := s.count("lp"); n != int64(wrote)+1 || wrote != last {
		t.Fatalf("count %d after lines 1 to %d (%d measurements) were written, want %d", n, last, wrote, wrote+1)
	}
	t.Logf("%d lines sent, %d written before 507: %s", lines, wrote, e.Message)

	r = s.do("POST", "/write?db=lp&precision=s", []byte("m,host=a v=2 1714564801\n"))
	if r.status != 507 || strings.Contains(string(r.body), `"line"`) || strings.Contains(string(r.body), "were written") {
		t.Fatalf("a body refused whole: %d %s", r.status, r.body)
	}
}
