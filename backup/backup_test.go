package backup_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/internal/s3test"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/timeseries"
)

var ctx = context.Background()

func openDB(t testing.TB, dir string) *timeseries.DB {
	t.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: dir, NoSync: true, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func openTarget(t testing.TB, dir string) objstore.Store {
	t.Helper()
	st, err := objstore.Open(ctx, "file://"+dir, objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fill makes a store with what a backup must hold: a time-series
// collection with a TTL, its rollup, a plain collection with a TTL index
// and a unique one.
func fill(t testing.TB, db *timeseries.DB) {
	t.Helper()
	ts := &model.TimeSeriesOptions{TimeField: "t", MetaField: "s"}
	day := int64(86400)
	if _, err := db.CreateCollection(ctx, "m", timeseries.CollectionOptions{TimeSeries: ts, ExpireAfterSeconds: &day}); err != nil {
		t.Fatal(err)
	}
	ro, err := timeseries.RollupOptions(ts, timeseries.RollupSpec{Source: "m", Window: "1m", Fields: []string{"v"}, Funcs: []string{"count", "avg"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "m1m", ro); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCollection(ctx, "p", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	hour := int64(3600)
	if _, _, err := db.CreateIndex(ctx, "p", timeseries.IndexSpec{Key: []timeseries.IndexKey{{Field: "at", Direction: 1}}, ExpireAfterSeconds: &hour}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreateIndex(ctx, "p", timeseries.IndexSpec{Key: []timeseries.IndexKey{{Field: "name", Direction: 1}}}); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 0, 2000)
}

// bulk writes n documents of 1 KiB that do not compress to p2, so that
// the store has tables a second backup can share.
func bulk(t testing.TB, db *timeseries.DB, n int) {
	t.Helper()
	if _, err := db.CreateCollection(ctx, "p2", timeseries.CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < n; k += 500 {
		ds := make([]document.Doc, min(500, n-k))
		for i := range ds {
			b := make([]byte, 1024)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			ds[i] = document.Doc{"_id": int64(k + i), "b": hex.EncodeToString(b)}
		}
		if res, err := db.Insert(ctx, "p2", timeseries.Batch{Documents: ds}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
			t.Fatal(err, res.Errors)
		}
	}
}

// insert writes n measurements to m and n/10 documents to p, from k on.
func insert(t testing.TB, db *timeseries.DB, k, n int) {
	t.Helper()
	now := time.Now().UnixNano()
	ms := make([]model.Measurement, n)
	for i := range ms {
		ms[i] = model.Measurement{Time: now - int64(k+i)*int64(time.Second), Meta: fmt.Sprintf(`{"id":"s%d"}`, (k+i)%13),
			Fields: []model.Field{{Name: "v", Value: model.Float(float64(k + i))}}}
	}
	if res, err := db.Insert(ctx, "m", timeseries.Batch{Measurements: ms}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	ds := make([]document.Doc, n/10)
	for i := range ds {
		ds[i] = document.Doc{"_id": int64(k + i), "name": fmt.Sprintf("n%d", k+i), "at": time.Now()}
	}
	if res, err := db.Insert(ctx, "p", timeseries.Batch{Documents: ds}, timeseries.InsertOptions{}); err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
}

// state renders what reads see of db: collections with their options and
// indexes, every row and document.
func state(t testing.TB, db *timeseries.DB) string {
	t.Helper()
	if err := db.CatchUpRollups(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err := db.ListCollections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, info := range infos {
		specs, err := db.ListIndexes(ctx, info.Name)
		if err != nil {
			t.Fatal(err)
		}
		opts, _ := json.Marshal(info.Options)
		ixs, _ := json.Marshal(specs)
		fmt.Fprintf(&b, "collection %s %s count %d indexes %s\n", info.Name, opts, info.Count, ixs)
		if info.Options.TimeSeries == nil {
			var docs []string
			_, err := timeseries.EachDoc(db.Find(ctx, info.Name, timeseries.FindOptions{}))(func(d document.Doc) error {
				docs = append(docs, string(document.AppendJSON(nil, d)))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(docs)
			b.WriteString(strings.Join(docs, "\n") + "\n")
			continue
		}
		cur, err := db.Find(ctx, info.Name, timeseries.FindOptions{Order: timeseries.SortAscending})
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for cur.Next() {
			rec := cur.Record()
			for i := range int(rec.NumRows()) {
				var r []string
				for c := range int(rec.NumCols()) {
					r = append(r, rec.ColumnName(c)+"="+rec.Column(c).ValueStr(i))
				}
				rows = append(rows, strings.Join(r, " "))
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		cur.Close()
		slices.Sort(rows)
		b.WriteString(strings.Join(rows, "\n") + "\n")
	}
	return b.String()
}

// TestCreateRestore backs a store up twice, the second time after more
// writes and a checkpoint, and restores each backup, by ID and as the
// newest: each restored store reads as the store did when its backup was
// taken, and the second backup copied only what changed.
func TestCreateRestore(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 5000, 300) // in memory and in the log only
	want1 := state(t, db)
	st := openTarget(t, t.TempDir())
	r1, err := backup.Create(ctx, db, st, backup.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.CopiedBytes != r1.Bytes || r1.Files == 0 {
		t.Fatalf("first backup: %+v: it copies every file", r1)
	}
	insert(t, db, 10000, 500)
	if err := db.DropCollection(ctx, "m1m"); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	want2 := state(t, db)
	r2, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := backup.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != r1.ID || list[1].ID != r2.ID || !list[0].Complete || !list[1].Complete {
		t.Fatalf("list: %+v", list)
	}
	for _, c := range []struct {
		id, want string
	}{{r1.ID, want1}, {"", want2}, {r2.ID, want2}} {
		if _, err := backup.Verify(ctx, st, c.id); err != nil {
			t.Fatalf("verify %q: %v", c.id, err)
		}
		dir := filepath.Join(t.TempDir(), "restored")
		m, err := backup.Restore(ctx, st, c.id, dir, backup.Options{})
		if err != nil {
			t.Fatalf("restore %q: %v", c.id, err)
		}
		if c.id != "" && m.ID != c.id {
			t.Fatalf("restored %s, asked for %s", m.ID, c.id)
		}
		r := openDB(t, dir)
		got := state(t, r)
		r.Close()
		if got != c.want {
			t.Fatalf("restore %q: the store does not read as it did: %s", c.id, firstDiff(got, c.want))
		}
	}
	// A data directory with files is not written over.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := backup.Restore(ctx, st, "", full, backup.Options{}); !errors.Is(err, backup.ErrDataDir) {
		t.Fatalf("restore into a directory with files: %v", err)
	}
}

// TestIncremental: a second backup copies the tables the first one
// copied no more, only what changed since; both restore.
func TestIncremental(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	bulk(t, db, 5000)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 5000, 300)
	st := openTarget(t, t.TempDir())
	r1, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r1.CopiedBytes != r1.Bytes || r1.Files == 0 {
		t.Fatalf("first backup: %+v: it copies every file", r1)
	}
	insert(t, db, 10000, 500)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r2, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full: %+v\nincremental: %+v", r1, r2)
	if r2.Bytes < r1.Bytes || r2.CopiedBytes > r2.Bytes/10 {
		t.Fatalf("the second backup copied %d of %d bytes: the tables it shares with the first were copied again", r2.CopiedBytes, r2.Bytes)
	}
	for _, id := range []string{r1.ID, r2.ID} {
		if _, err := backup.Restore(ctx, st, id, filepath.Join(t.TempDir(), "r"), backup.Options{}); err != nil {
			t.Fatal(err)
		}
	}
}

// keyOf returns the first key of st under prefix with suffix.
func keyOf(t *testing.T, root, prefix, suffix string) string {
	t.Helper()
	var found string
	filepath.WalkDir(filepath.Join(root, prefix), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) && found == "" {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no file under %s ending %s", prefix, suffix)
	}
	return found
}

// TestDamageIsRefused: a flipped byte in a file, a missing file, a
// manifest cut short or a backup without its manifest are caught by
// Verify and refused by Restore, which leaves no data directory.
func TestDamageIsRefused(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, root, id string)
		want   error
		say    string
	}{
		{"flipped byte", func(t *testing.T, root, id string) {
			p := keyOf(t, root, "files", "")
			for _, e := range mustList(t, filepath.Join(root, "files")) {
				if strings.Contains(e, ".sst.") {
					p = filepath.Join(root, "files", e)
				}
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x10
			os.WriteFile(p, b, 0o644)
		}, backup.ErrDamaged, "checksum mismatch"},
		{"missing file", func(t *testing.T, root, id string) {
			os.Remove(keyOf(t, root, "files", ""))
		}, backup.ErrDamaged, "missing"},
		{"truncated file", func(t *testing.T, root, id string) {
			p := keyOf(t, root, "files", "")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-1)
		}, backup.ErrDamaged, "bytes, the manifest says"},
		{"manifest cut short", func(t *testing.T, root, id string) {
			p := filepath.Join(root, "backups", id, "manifest")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-10)
		}, backup.ErrDamaged, "manifest"},
		{"manifest changed", func(t *testing.T, root, id string) {
			p := filepath.Join(root, "backups", id, "manifest")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"size": `, `"size": 1`, 1)), 0o644)
		}, backup.ErrDamaged, "does not match its checksum"},
		{"no manifest", func(t *testing.T, root, id string) {
			os.Remove(filepath.Join(root, "backups", id, "manifest"))
		}, backup.ErrNoBackup, "no complete backup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			st := openTarget(t, root)
			res, err := backup.Create(ctx, db, st, backup.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := backup.Verify(ctx, st, ""); err != nil {
				t.Fatalf("before the damage: %v", err)
			}
			c.damage(t, root, res.ID)
			for _, id := range []string{"", res.ID} {
				_, err := backup.Verify(ctx, st, id)
				if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.say) {
					t.Fatalf("verify %q: %v, want %v saying %q", id, err, c.want, c.say)
				}
				dir := filepath.Join(t.TempDir(), "restored")
				_, err = backup.Restore(ctx, st, id, dir, backup.Options{})
				if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.say) {
					t.Fatalf("restore %q: %v, want %v saying %q", id, err, c.want, c.say)
				}
				if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
					t.Fatalf("a refused restore left %s: %v", dir, serr)
				}
				if left, _ := filepath.Glob(dir + "*"); len(left) > 0 {
					t.Fatalf("a refused restore left %v", left)
				}
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}

func mustList(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestPrune keeps the newest backups, removes the others' files that no
// kept backup shares, and leaves the kept ones restorable.
func TestPrune(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	root := t.TempDir()
	st := openTarget(t, root)
	var ids []string
	for i := range 4 {
		insert(t, db, 100000*(i+1), 400)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		res, err := backup.Create(ctx, db, st, backup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	before := len(mustList(t, filepath.Join(root, "files")))
	want := state(t, db)
	if _, err := backup.Prune(ctx, st, 0, time.Now()); err == nil {
		t.Fatal("prune --keep 0 was not refused")
	}
	res, err := backup.Prune(ctx, st, 2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Removed, ids[:2]) || !slices.Equal(res.Kept, ids[2:]) || res.Files == 0 || res.FilesSkipped {
		t.Fatalf("prune: %+v (backups %v)", res, ids)
	}
	after := len(mustList(t, filepath.Join(root, "files")))
	if after != before-res.Files {
		t.Fatalf("%d files before, %d after, %d removed", before, after, res.Files)
	}
	for _, id := range ids[2:] {
		if _, err := backup.Verify(ctx, st, id); err != nil {
			t.Fatalf("verify %s after prune: %v", id, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "r")
	if _, err := backup.Restore(ctx, st, "", dir, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	r := openDB(t, dir)
	defer r.Close()
	if got := state(t, r); got != want {
		t.Fatalf("the newest backup after prune does not read as the store: %s", firstDiff(got, want))
	}
	// An incomplete backup younger than PendingGrace holds off the file
	// collection; an older one is removed.
	os.MkdirAll(filepath.Join(root, "backups", "20200101T000000.000Z-abcd"), 0o755)
	os.WriteFile(filepath.Join(root, "backups", "20200101T000000.000Z-abcd", "pending"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(root, "files", "orphan.1.x"), []byte("x"), 0o644)
	res, err = backup.Prune(ctx, st, 2, time.Now())
	if err != nil || !res.FilesSkipped || res.Files != 0 {
		t.Fatalf("prune with a backup under way: %+v %v", res, err)
	}
	res, err = backup.Prune(ctx, st, 2, time.Now().Add(backup.PendingGrace+time.Hour))
	if err != nil || res.FilesSkipped || res.Files != 1 || !slices.Equal(res.Removed, []string{"20200101T000000.000Z-abcd"}) {
		t.Fatalf("prune after the grace: %+v %v", res, err)
	}
}

func TestSplitURL(t *testing.T) {
	for _, c := range []struct{ in, target, id string }{
		{"file:///b", "file:///b", ""},
		{"file:///b/20261127T200008.123Z-9f3a", "file:///b", "20261127T200008.123Z-9f3a"},
		{"s3://bucket/x/20261127T200008.123Z-9f3a/", "s3://bucket/x", "20261127T200008.123Z-9f3a"},
		{"s3://bucket/x/y", "s3://bucket/x/y", ""},
	} {
		if target, id := backup.SplitURL(c.in); target != c.target || id != c.id {
			t.Errorf("SplitURL(%q) = %q, %q; want %q, %q", c.in, target, id, c.target, c.id)
		}
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got  %.500s\n want %.500s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}

// TestPaced: a backup with MaxBytesPerSecond takes at least its bytes at
// that rate.
func TestPaced(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	st := openTarget(t, t.TempDir())
	res, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rate := res.Bytes * 2 // half a second: each file is read to checksum it and to copy it
	res, err = backup.Create(ctx, db, openTarget(t, t.TempDir()), backup.Options{MaxBytesPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	if res.Took < 400*time.Millisecond {
		t.Fatalf("a backup of %d bytes at %d bytes/s took %v", res.Bytes, rate, res.Took)
	}
}

// TestS3 takes a full and an incremental backup into an S3 bucket on a
// real S3 server (SeaweedFS on loopback), verifies them, catches a
// flipped byte, and restores the newest into a store that reads as the
// source did.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	st, err := objstore.Open(ctx, "s3://"+srv.Bucket+"/backups", objstore.Options{S3Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	r1, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, db, 10000, 200)
	want := state(t, db)
	r2, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r2.CopiedBytes >= r1.CopiedBytes || r2.CopiedBytes == 0 {
		t.Fatalf("incremental: copied %d of %d, the first copied %d", r2.CopiedBytes, r2.Bytes, r1.CopiedBytes)
	}
	if _, err := backup.Verify(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(ctx, st, "", dir, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	r := openDB(t, dir)
	got := state(t, r)
	r.Close()
	if got != want {
		t.Fatalf("restored from S3: %s", firstDiff(got, want))
	}
	// A flipped byte in one of the objects: verify names the damage.
	var key string
	var size int64
	if err := st.List(ctx, "files/", func(in objstore.Info) error {
		if in.Size > size {
			key, size = in.Key, in.Size
		}
		return nil
	}); err != nil || key == "" {
		t.Fatalf("list: %v", err)
	}
	obj, err := st.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, obj.Size())
	_, err = obj.ReadAt(data, 0)
	obj.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(ctx, st, ""); err == nil {
		t.Fatal("verify passed a flipped byte")
	}
}

// TestMemberState: the state a DB's backup hook returns is the manifest's
// Member, read back by ReadManifest; a backup without a hook has none.
func TestMemberState(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fill(t, db)
	st := openTarget(t, t.TempDir())
	res, err := backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.ReadManifest(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Member != nil {
		t.Fatalf("a standalone backup records member state %s", m.Member)
	}
	db.SetBackupHook(func() ([]byte, func(), error) {
		return []byte(`{"index":42,"term":3}`), func() {}, nil
	})
	res, err = backup.Create(ctx, db, st, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{res.ID, ""} {
		m, err := backup.ReadManifest(ctx, st, id)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Index, Term uint64 }
		if err := json.Unmarshal(m.Member, &got); err != nil || got.Index != 42 || got.Term != 3 {
			t.Fatalf("manifest %q member %s (%v), want index 42, term 3", id, m.Member, err)
		}
	}
	if _, err := backup.Verify(ctx, st, res.ID); err != nil {
		t.Fatal(err)
	}
	db.SetBackupHook(func() ([]byte, func(), error) { return []byte("not json"), func() {}, nil })
	if _, err := backup.Create(ctx, db, st, backup.Options{}); err == nil {
		t.Fatal("a backup recorded member state that is not JSON")
	}
}
