package timeseries

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/ttl"
)

// copyImage writes the files of im into a new data directory.
func copyImage(t *testing.T, im *BackupImage) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range im.Files {
		r, err := im.Open(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(w, r)
		r.Close()
		if err := errors.Join(err, w.Close()); err != nil {
			t.Fatal(err)
		}
		if n != f.Size {
			t.Fatalf("%s: copied %d bytes, the image lists %d", f.Path, n, f.Size)
		}
	}
	return dst
}

// TestBackupDuringWrites takes backups while time-series writers, a plain
// collection's writer, DDL, TTL passes, checkpoints and merges run, opens
// each image as a store and checks it against what was acknowledged:
// every batch acknowledged before the call is in it, each writer's
// batches form a prefix of what it sent (nothing after a missing one),
// and every batch is whole.
func TestBackupDuringWrites(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointLogBytes = 64 << 10
		o.LogSegmentSize = 256 << 10
	})
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "w"})
	mustPlain(t, db, "p", CollectionOptions{})
	if _, _, err := db.CreateIndex(ctx, "p", IndexSpec{Key: []IndexKey{{Field: "x", Direction: 1}}}); err != nil {
		t.Fatal(err)
	}
	// exp's documents expire while backups run.
	mustPlain(t, db, "exp", CollectionOptions{})
	one := int64(1)
	if _, _, err := db.CreateIndex(ctx, "exp", IndexSpec{Key: []IndexKey{{Field: "at", Direction: 1}}, ExpireAfterSeconds: &one}); err != nil {
		t.Fatal(err)
	}
	const expDocs = 400
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < expDocs; i += 100 {
		ds := make([]document.Doc, 100)
		for j := range ds {
			ds[j] = document.Doc{"_id": int64(i + j), "at": old}
		}
		if _, err := db.Insert(ctx, "exp", Batch{Documents: ds}, InsertOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	const writers, perBatch = 3, 20
	var acked [writers + 1]atomic.Int64 // batches acknowledged; the last is p's writer
	var ddlDone, expired atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 10)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meta := fmt.Sprintf(`{"w":"w%d"}`, w)
			for k := int64(0); ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				ms := make([]model.Measurement, perBatch)
				for i := range ms {
					ms[i] = model.Measurement{Time: (k*perBatch + int64(i)) * 1e9, Meta: meta,
						Fields: []model.Field{{Name: "k", Value: model.Int(k)}}}
				}
				if res, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
					errc <- fmt.Errorf("insert: %v %v", err, res.Errors)
					return
				}
				acked[w].Store(k + 1)
			}
		}()
	}
	wg.Add(3)
	go func() { // the plain collection's writer: two documents a batch
		defer wg.Done()
		for k := int64(0); ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			ds := []document.Doc{{"_id": 2 * k, "x": k}, {"_id": 2*k + 1, "x": k}}
			if res, err := db.Insert(ctx, "p", Batch{Documents: ds}, InsertOptions{}); err != nil || len(res.Errors) > 0 {
				errc <- fmt.Errorf("insert: %v %v", err, res.Errors)
				return
			}
			acked[writers].Store(k + 1)
		}
	}()
	go func() { // DDL: step n creates dn, and drops it again when n is even
		defer wg.Done()
		for n := int64(0); ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("d%d", n)
			if _, err := db.CreateCollection(ctx, name, CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t"}}); err != nil {
				errc <- err
				return
			}
			if n%2 == 0 {
				if err := db.DropCollection(ctx, name); err != nil {
					errc <- err
					return
				}
			}
			ddlDone.Store(n + 1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	go func() { // TTL passes, ten documents at a time
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			targets, err := db.Targets(ctx)
			if err != nil {
				errc <- err
				return
			}
			for _, tg := range targets {
				out, err := db.Expire(ctx, tg, time.Now(), ttl.Budget{Docs: 10})
				if err != nil {
					errc <- err
					return
				}
				expired.Add(out.Docs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	type taken struct {
		dir              string
		acked            [writers + 1]int64
		ddl, expired     int64
		sentAfter        [writers + 1]int64
		ddlAfter         int64
		files            int
		segments, tables int
	}
	var images []*taken
	for range 3 {
		time.Sleep(150 * time.Millisecond)
		tk := &taken{}
		for i := range acked {
			tk.acked[i] = acked[i].Load()
		}
		tk.ddl, tk.expired = ddlDone.Load(), expired.Load()
		err := db.Backup(func(im *BackupImage) error {
			// Writes go on while the image is read.
			time.Sleep(20 * time.Millisecond)
			tk.dir = copyImage(t, im)
			tk.files = len(im.Files)
			for _, f := range im.Files {
				if strings.HasPrefix(f.Path, "wal/") {
					tk.segments++
				}
				if strings.HasSuffix(f.Path, ".sst") {
					tk.tables++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Batches sent after the backup returned are not in it (a bound,
		// read before the next batch starts, plus the one in flight).
		for i := range acked {
			tk.sentAfter[i] = acked[i].Load() + 1
		}
		tk.ddlAfter = ddlDone.Load() + 1
		images = append(images, tk)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if _, err := os.Stat(filepath.Join(db.opts.Dir, backupDirName)); !os.IsNotExist(err) {
		t.Fatalf("the image directory is left behind: %v", err)
	}

	for n, tk := range images {
		t.Logf("image %d: %d files (%d tables, %d log segments), acknowledged before %v", n, tk.files, tk.tables, tk.segments, tk.acked)
		r := openTest(t, tk.dir, nil)
		// Time series: per writer, batches 0..K-1, each of perBatch rows.
		byWriter := map[string]map[int64]int{}
		for _, row := range findRows(t, r, "m", FindOptions{}) {
			var k int64
			if _, err := fmt.Sscanf(strings.TrimSpace(row.vals), "k=%d", &k); err != nil {
				t.Fatalf("row %v: %v", row, err)
			}
			// The meta column holds the meta value as JSON text.
			w := writerMeta.FindString(row.meta)
			if byWriter[w] == nil {
				byWriter[w] = map[int64]int{}
			}
			byWriter[w][k]++
		}
		for w := range writers {
			got := byWriter[fmt.Sprintf("w%d", w)]
			checkPrefix(t, n, fmt.Sprintf("writer %d", w), got, perBatch, tk.acked[w], tk.sentAfter[w])
		}
		// The plain collection: documents 2k and 2k+1 for k in 0..K-1.
		ids, _ := findIDs(t, r, "p", FindOptions{})
		got := map[int64]int{}
		for _, id := range ids {
			// Rendered as Extended JSON: {"$numberLong": "12"}.
			v, err := strconv.ParseInt(digits.FindString(id), 10, 64)
			if err != nil {
				t.Fatalf("image %d: _id %s: %v", n, id, err)
			}
			got[v/2]++
		}
		checkPrefix(t, n, "plain writer", got, 2, tk.acked[writers], tk.sentAfter[writers])
		// Its index is there, and answers.
		if specs, err := r.ListIndexes(ctx, "p"); err != nil || len(specs) != 2 {
			t.Fatalf("image %d: indexes of p: %v %v", n, specs, err)
		}
		// DDL: every step done before the call, none begun after it.
		for i := int64(0); i < tk.ddlAfter+1; i++ {
			_, err := r.Describe(ctx, fmt.Sprintf("d%d", i))
			exists := err == nil
			switch {
			case i < tk.ddl && exists != (i%2 == 1):
				t.Fatalf("image %d: collection d%d exists=%v after step %d was acknowledged", n, i, exists, i)
			case i > tk.ddlAfter && exists:
				t.Fatalf("image %d: collection d%d of a step begun after the backup exists", n, i)
			}
		}
		// TTL: what passes finished before the call deleted is gone.
		ids, _ = findIDs(t, r, "exp", FindOptions{})
		if int64(len(ids)) > expDocs-tk.expired {
			t.Fatalf("image %d: %d expired documents left, but %d of %d were deleted before the backup", n, len(ids), tk.expired, expDocs)
		}
		// The restored store writes on and survives a restart.
		before := len(findRows(t, r, "m", FindOptions{}))
		insertSensors(t, r, "m", 1<<20, 10, "after")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		r = openTest(t, tk.dir, nil)
		if rows := findRows(t, r, "m", FindOptions{}); len(rows) != before+10 {
			t.Fatalf("image %d: %d rows after 10 written on the restored store, want %d", n, len(rows), before+10)
		}
		r.Close()
	}
}

var (
	writerMeta = regexp.MustCompile(`w[0-9]+`)
	digits     = regexp.MustCompile(`[0-9]+`)
)

// checkPrefix checks that got (batch -> rows) holds batches 0..K-1 with
// rows rows each, acked <= K <= sent.
func checkPrefix(t *testing.T, image int, who string, got map[int64]int, rows int, acked, sent int64) {
	t.Helper()
	var ks []int64
	for k, n := range got {
		if n != rows {
			t.Fatalf("image %d: %s: batch %d has %d rows, not %d: half a batch", image, who, k, n, rows)
		}
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	for i, k := range ks {
		if int64(i) != k {
			t.Fatalf("image %d: %s: batch %d is missing but %d is there", image, who, i, k)
		}
	}
	if k := int64(len(ks)); k < acked || k > sent {
		t.Fatalf("image %d: %s: %d batches, but %d were acknowledged before the backup and %d sent before it returned", image, who, k, acked, sent)
	}
}

// TestBackupOneAtATime: a second backup while one runs is refused, and
// the next one after it runs.
func TestBackupOneAtATime(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, db, "m", 0, 100, "a")
	err := db.Backup(func(*BackupImage) error {
		return db.Backup(func(*BackupImage) error { return nil })
	})
	if !errors.Is(err, ErrBackupRunning) {
		t.Fatalf("a backup inside a backup: %v, want ErrBackupRunning", err)
	}
	if err := db.Backup(func(*BackupImage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := (&BackupImage{}).Open("store/x"); err == nil {
		t.Fatal("an image opened a file it does not list")
	}
}

// TestBackupExternalLog: the engine of a replica set's member keeps no log
// of its own; its image holds every write applied before the call, and
// opens as a store of its own.
func TestBackupExternalLog(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.ExternalLog = true })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, db, "m", 0, 300, "a")
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	insertSensors(t, db, "m", 300, 200, "b") // in memory only
	mustPlain(t, db, "p", CollectionOptions{})
	insertDocs(t, db, "p", `{"_id": 1, "x": 1}`, `{"_id": 2, "x": 2}`)
	want := snapshotState(t, db)
	var dir string
	if err := db.Backup(func(im *BackupImage) error {
		insertSensors(t, db, "m", 900, 10, "late") // not in the image
		dir = copyImage(t, im)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, dir, nil)
	defer r.Close()
	if got := snapshotState(t, r); got != want {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, want)
	}
}

// TestBackupHook: the hook runs before the image is made, its state is
// the image's, and its release runs once the image exists, before fn; a
// hook's error fails the backup; a removed hook is not called.
func TestBackupHook(t *testing.T) {
	db := openTest(t, t.TempDir(), func(o *Options) { o.ExternalLog = true })
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "t", MetaField: "s"})
	insertSensors(t, db, "m", 0, 100, "a")
	var steps []string
	db.SetBackupHook(func() ([]byte, func(), error) {
		steps = append(steps, "hook")
		return []byte("index 7"), func() { steps = append(steps, "release") }, nil
	})
	err := db.Backup(func(im *BackupImage) error {
		steps = append(steps, "image")
		if string(im.State) != "index 7" {
			t.Errorf("image state %q, want the hook's", im.State)
		}
		if len(im.Files) == 0 {
			t.Error("the image has no files")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, ","); got != "hook,release,image" {
		t.Fatalf("steps %s, want hook,release,image", got)
	}
	refused := errors.New("not now")
	db.SetBackupHook(func() ([]byte, func(), error) { return nil, nil, refused })
	if err := db.Backup(func(*BackupImage) error { return nil }); !errors.Is(err, refused) {
		t.Fatalf("a hook's error: %v, want it", err)
	}
	db.SetBackupHook(nil)
	if err := db.Backup(func(im *BackupImage) error {
		if im.State != nil {
			t.Errorf("state %q without a hook", im.State)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
