package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/internal/s3test"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

// TestBackupWhileWriting takes a backup over HTTP while a client writes
// over HTTP, restores it, and checks that every batch acknowledged before
// the call is in the restored store, in full, and that the writer never
// failed.
func TestBackupWhileWriting(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(201, "PUT", "/v1/collections/p", `{}`)
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := int64(0); ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			var b strings.Builder
			b.WriteString("[")
			for i := range 10 {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"timestamp": "2024-05-01T%02d:%02d:%02dZ", "sensor": "b%d", "i": %d}`, (k/3600)%24, (k/60)%60, k%60, k, i)
			}
			b.WriteString("]")
			r := s.do("POST", "/v1/collections/s/documents", []byte(b.String()))
			if r.status != 200 {
				t.Errorf("insert during the backup: %d %s", r.status, r.body)
				return
			}
			acked.Store(k + 1)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	s.mustDo(200, "POST", "/v1/collections/p/documents", `[{"_id": 1, "x": "before"}]`)
	before := acked.Load()
	target := t.TempDir()
	r := s.mustDo(200, "POST", "/v1/admin/backup", fmt.Sprintf(`{"to": "file://%s", "maxBytesPerSecond": 100000000}`, target))
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	rep := r.json(t)
	id, _ := rep["backup"].(string)
	if !backup.ValidID(id) || rep["files"].(float64) == 0 || rep["bytes"].(float64) == 0 || rep["copiedBytes"] != rep["bytes"] {
		t.Fatalf("reply: %s", r.body)
	}

	st, err := objstore.Open(context.Background(), "file://"+target, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(context.Background(), st, id, dir, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := timeseries.Open(timeseries.Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rs := serveDB(t, db, nil)
	perBatch := map[string]int{}
	for _, row := range rs.findRows("s", `{}`) {
		perBatch[row["sensor"].(string)]++
	}
	for k := range before {
		if n := perBatch[fmt.Sprintf("b%d", k)]; n != 10 {
			t.Fatalf("batch %d, acknowledged before the backup, has %d of its 10 rows in it", k, n)
		}
	}
	for b, n := range perBatch {
		if n != 10 {
			t.Fatalf("batch %s is in the backup in part: %d of 10 rows", b, n)
		}
	}
	if rows := rs.findRows("p", `{}`); len(rows) != 1 {
		t.Fatalf("the plain collection holds %v", rows)
	}
	t.Logf("%d batches acknowledged before the backup, %d in it", before, len(perBatch))
}

// TestBackupBadTarget: a target that does not parse is 400 BadValue (2);
// one that cannot be written is 400 naming it, with nothing that looks like
// a backup left; a second backup while one runs is 409.
func TestBackupBadTarget(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o555)
	for _, c := range []struct{ body, say string }{
		{`{"to": "ftp://host/x"}`, "scheme"},
		{`{"to": "file://host/x"}`, "local path"},
		{`{"to": "::"}`, "bad URL"},
		{`{"to": 5}`, "must name the backup"},
		{`{}`, "must name the backup"},
		{`{"to": "file:///tmp/x", "keep": 3}`, "unknown field"},
		{`{"to": "file:///tmp/x", "maxBytesPerSecond": -1}`, "maxBytesPerSecond"},
		{`{"to": "file:///tmp/x", "maxBytesPerSecond": 1.5}`, "maxBytesPerSecond"},
		{`{"to": "file:///tmp/x", "maxBytesPerSecond": "fast"}`, "maxBytesPerSecond"},
		{`[1]`, ""},
		{fmt.Sprintf(`{"to": "file://%s/sub"}`, file), file},
	} {
		r := s.mustDo(400, "POST", "/v1/admin/backup", c.body)
		if code := r.errorCode(t); code != 2 || !strings.Contains(string(r.body), c.say) {
			t.Fatalf("%s: code %d: %s (want code 2 saying %q)", c.body, code, r.body, c.say)
		}
	}
	if os.Geteuid() != 0 { // root writes anywhere
		r := s.mustDo(400, "POST", "/v1/admin/backup", fmt.Sprintf(`{"to": "file://%s"}`, ro))
		if code := r.errorCode(t); code != 2 || !strings.Contains(string(r.body), ro) {
			t.Fatalf("read-only target: %s", r.body)
		}
		ents, _ := os.ReadDir(ro)
		if len(ents) != 0 {
			t.Fatalf("a failed backup left %v in its target", ents)
		}
	}

	// One at a time: a backup held open by the engine makes the API's
	// backup a 409, and the next one succeeds.
	target := t.TempDir()
	err := s.db.Backup(func(*timeseries.BackupImage) error {
		r := s.mustDo(409, "POST", "/v1/admin/backup", fmt.Sprintf(`{"to": "file://%s"}`, target))
		if !strings.Contains(string(r.body), "already running") {
			t.Errorf("409: %s", r.body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := objstore.Open(context.Background(), "file://"+target, objstore.Options{})
	defer st.Close()
	if list, err := backup.List(context.Background(), st); err != nil || len(list) != 0 {
		t.Fatalf("a refused backup left %+v %v", list, err)
	}
	s.mustDo(200, "POST", "/v1/admin/backup", fmt.Sprintf(`{"to": "file://%s"}`, target))
}

// TestBackupInCurrentOp: a backup in progress is listed by /v1/currentop
// with the files it has done.
func TestBackupInCurrentOp(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	target := t.TempDir()
	done := make(chan reply, 1)
	go func() {
		// Paced to last about a second.
		done <- s.do("POST", "/v1/admin/backup", []byte(fmt.Sprintf(`{"to": "file://%s", "maxBytesPerSecond": 8000}`, target)))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.mustDo(200, "GET", "/v1/currentop", "")
		if strings.Contains(string(r.body), `"desc":"backup to file://`+target) {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the backup ended (%d %s) and currentop never listed it", r.status, r.body)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("currentop never listed the backup")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := <-done; r.status != 200 {
		t.Fatalf("backup: %d %s", r.status, r.body)
	}
	if r := s.mustDo(200, "GET", "/v1/currentop", ""); strings.Contains(string(r.body), "backup to") {
		t.Fatalf("a finished backup is still listed: %s", r.body)
	}
}

// A backup over HTTP into an S3 bucket of a real S3 server (SeaweedFS on
// loopback), the server's BackupS3Endpoint naming it; a bucket that does
// not exist is a 400 naming it, and nothing is written.
func TestBackupToS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	s := newTestServer(t, func(o *api.Options) { o.BackupS3Endpoint = srv.Endpoint })
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	r := s.mustDo(200, "POST", "/v1/admin/backup", fmt.Sprintf(`{"to": "s3://%s/nightly"}`, srv.Bucket))
	var rep struct {
		Backup string `json:"backup"`
		Files  int    `json:"files"`
		Bytes  int64  `json:"bytes"`
	}
	if err := json.Unmarshal(r.body, &rep); err != nil || rep.Backup == "" || rep.Files == 0 || rep.Bytes == 0 {
		t.Fatalf("reply %s: %v", r.body, err)
	}
	st, err := objstore.Open(context.Background(), "s3://"+srv.Bucket+"/nightly", objstore.Options{S3Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := backup.Verify(context.Background(), st, rep.Backup); err != nil {
		t.Fatalf("verify the backup in the bucket: %v", err)
	}
	r = s.mustDo(400, "POST", "/v1/admin/backup", `{"to": "s3://no-such-bucket/x"}`)
	if code := r.errorCode(t); code != 2 || !strings.Contains(string(r.body), "no-such-bucket") {
		t.Fatalf("missing bucket: %s", r.body)
	}
}
