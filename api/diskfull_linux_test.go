package api_test

import (
	"os"
	"path/filepath"
	"strings"
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
