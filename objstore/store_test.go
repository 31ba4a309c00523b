package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hourglassdb/hourglass/internal/s3test"
	"github.com/hourglassdb/hourglass/objstore"
)

// The conformance suite: every backend passes the same tests. storeFunc
// gives each test an empty store of its own.
type storeFunc func(t *testing.T) objstore.Store

func TestDir(t *testing.T) {
	testStore(t, func(t *testing.T) objstore.Store {
		return open(t, fileURL(t.TempDir()), objstore.Options{})
	})
}

// TestS3 runs the suite on SeaweedFS, one server for all of it and a
// prefix of its own for each test.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	o := objstore.Options{S3Endpoint: srv.Endpoint}
	testStore(t, func(t *testing.T) objstore.Store {
		return open(t, "s3://"+srv.Bucket+"/"+strings.ReplaceAll(t.Name(), "/", "."), o)
	})
	t.Run("MissingBucket", func(t *testing.T) { testMissingBucket(t, srv) })
	t.Run("Prefixes", func(t *testing.T) { testPrefixes(t, srv) })
	t.Run("BadURLs", func(t *testing.T) { testBadS3URLs(t, srv) })
	t.Run("ServerHangs", func(t *testing.T) { testServerHangs(t, srv) })
}

func testStore(t *testing.T, newStore storeFunc) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, storeFunc)
	}{
		{"PutOpenReadAt", testPutOpenReadAt},
		{"Empty", testEmpty},
		{"Large", testLarge},
		{"Stat", testStat},
		{"List", testList},
		{"Delete", testDelete},
		{"Replace", testReplace},
		{"BadKeys", testBadKeys},
		{"WrongSize", testWrongSize},
		{"Cancelled", testCancelled},
		{"StalledBody", testStalledBody},
		{"TempLookalike", testTempLookalike},
		{"OddKeys", testOddKeys},
		{"Bodies", testBodies},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

// fileURL is the file:// URL of dir, escaped: a fuzz test's directory has
// a '#' in its name.
func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func open(t *testing.T, url string, o objstore.Options) objstore.Store {
	t.Helper()
	st, err := objstore.Open(t.Context(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	return st
}

// pattern is n bytes that differ at every offset a test reads.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ byte(i>>8) ^ seed
	}
	return b
}

// stream hides a reader's other methods (Seek, ReadAt), as a pipe would.
type stream struct{ r io.Reader }

func (s stream) Read(p []byte) (int, error) { return s.r.Read(p) }

func put(t *testing.T, st objstore.Store, key string, b []byte) {
	t.Helper()
	if err := st.Put(t.Context(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, st objstore.Store, key string) []byte {
	t.Helper()
	o, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if n, err := o.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("read %s: %d of %d bytes, %v", key, n, len(b), err)
	}
	return b
}

func notExist(t *testing.T, st objstore.Store, key string) {
	t.Helper()
	if _, err := st.Stat(t.Context(), key); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("stat %s: %v, want ErrNotExist", key, err)
	}
	if _, err := st.Open(t.Context(), key); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("open %s: %v, want ErrNotExist", key, err)
	}
}

func testPutOpenReadAt(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	const size = 1000
	want := pattern(size, 1)
	if err := st.Put(t.Context(), "sensors/date=2026-01-02/0001.parquet", stream{bytes.NewReader(want)}, size); err != nil {
		t.Fatal(err)
	}
	o, err := st.Open(t.Context(), "sensors/date=2026-01-02/0001.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Size() != size {
		t.Fatalf("Size = %d, want %d", o.Size(), size)
	}
	for _, r := range []struct {
		off, n int64
		want   int64 // bytes read
		eof    bool  // io.EOF required
	}{
		{0, 10, 10, false},
		{500, 100, 100, false},
		{size - 8, 8, 8, false}, // the footer, as a Parquet reader asks for it
		{995, 10, 5, true},      // across the end
		{size, 1, 0, true},
		{size + 10, 4, 0, true},
		{0, size, size, false},
		{3, 0, 0, false},
	} {
		p := make([]byte, r.n)
		n, err := o.ReadAt(p, r.off)
		if int64(n) != r.want {
			t.Errorf("ReadAt(%d bytes at %d) = %d bytes (%v), want %d", r.n, r.off, n, err, r.want)
			continue
		}
		if r.eof && err != io.EOF {
			t.Errorf("ReadAt(%d bytes at %d): %v, want io.EOF", r.n, r.off, err)
		}
		if !r.eof && err != nil && !(err == io.EOF && r.off+r.n == size) {
			t.Errorf("ReadAt(%d bytes at %d): %v", r.n, r.off, err)
		}
		if n > 0 && !bytes.Equal(p[:n], want[r.off:r.off+int64(n)]) {
			t.Errorf("ReadAt(%d bytes at %d): wrong bytes", r.n, r.off)
		}
	}
	if _, err := o.ReadAt(make([]byte, 1), -1); err == nil {
		t.Error("ReadAt at -1: no error")
	}
}

func testEmpty(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	put(t, st, "empty", nil)
	in, err := st.Stat(t.Context(), "empty")
	if err != nil || in.Size != 0 {
		t.Fatalf("Stat = %+v, %v", in, err)
	}
	o, err := st.Open(t.Context(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if n, err := o.ReadAt(make([]byte, 1), 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt on an empty object = %d, %v; want 0, io.EOF", n, err)
	}
}

// testLarge puts an object past minio-go's 16 MiB part size (a multipart
// upload) from a plain reader, and reads across a part boundary.
func testLarge(t *testing.T, newStore storeFunc) {
	if testing.Short() {
		t.Skip("short")
	}
	st := newStore(t)
	const size = 17<<20 + 3
	want := pattern(size, 2)
	if err := st.Put(t.Context(), "big", stream{bytes.NewReader(want)}, size); err != nil {
		t.Fatal(err)
	}
	o, err := st.Open(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Size() != size {
		t.Fatalf("Size = %d, want %d", o.Size(), size)
	}
	p := make([]byte, 1<<20)
	off := int64(16<<20 - 1000)
	if n, err := o.ReadAt(p, off); n != len(p) || err != nil {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(p, want[off:off+int64(len(p))]) {
		t.Fatal("wrong bytes across the part boundary")
	}
	// Too short by one byte at the very end: nothing is stored.
	err = st.Put(t.Context(), "big2", stream{bytes.NewReader(want[:size-1])}, size)
	if err == nil {
		t.Fatal("a body one byte short of a multipart size was stored")
	}
	notExist(t, st, "big2")
}

func testStat(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	before := time.Now().Add(-time.Minute)
	put(t, st, "a/b", pattern(42, 3))
	in, err := st.Stat(t.Context(), "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if in.Key != "a/b" || in.Size != 42 || in.ModTime.Before(before) || in.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Stat = %+v", in)
	}
	notExist(t, st, "a/c")
	notExist(t, st, "a") // a "directory"
}

func list(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	err := st.List(t.Context(), prefix, func(in objstore.Info) error {
		keys = append(keys, in.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func testList(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	keys := []string{"b/2", "a/10", "ab", "a/1", "a/sub/x", "a/2", "a-b", "b/1"}
	for _, k := range keys {
		put(t, st, k, []byte(k)) // size = len(key), checked below
	}
	sorted := slices.Sorted(slices.Values(keys))
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", sorted},
		{"a/", []string{"a/1", "a/10", "a/2", "a/sub/x"}},
		{"a", []string{"a-b", "a/1", "a/10", "a/2", "a/sub/x", "ab"}},
		{"a/1", []string{"a/1", "a/10"}},
		{"a/sub/", []string{"a/sub/x"}},
		{"b/2", []string{"b/2"}},
		{"c", nil},
		{"c/d/", nil},
	} {
		if got := list(t, st, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	before := time.Now().Add(-time.Minute)
	if err := st.List(t.Context(), "", func(in objstore.Info) error {
		if int(in.Size) != len(in.Key) || in.ModTime.Before(before) {
			t.Errorf("List: %+v, want size %d and a recent time", in, len(in.Key))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	var n int
	err := st.List(t.Context(), "", func(objstore.Info) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("List stopped by fn: %v after %d calls, want %v after 2", err, n, stop)
	}
	if err := st.List(t.Context(), "../", func(objstore.Info) error { return nil }); !errors.Is(err, objstore.ErrBadKey) {
		t.Fatalf("List(\"../\"): %v, want ErrBadKey", err)
	}
}

func testDelete(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	put(t, st, "d/x", []byte("x"))
	put(t, st, "d/y", []byte("y"))
	for range 2 {
		if err := st.Delete(t.Context(), "d/x"); err != nil {
			t.Fatal(err)
		}
	}
	notExist(t, st, "d/x")
	if err := st.Delete(t.Context(), "never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("List after Delete = %q", got)
	}
}

func testReplace(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	v1, v2 := pattern(300, 4), pattern(200, 5)
	put(t, st, "k", v1)
	old, err := st.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	put(t, st, "k", v2)
	if got := get(t, st, "k"); !bytes.Equal(got, v2) {
		t.Fatalf("after replace: %d bytes, not the new object", len(got))
	}
	if in, err := st.Stat(t.Context(), "k"); err != nil || in.Size != 200 {
		t.Fatalf("Stat after replace = %+v, %v", in, err)
	}
	// What was opened before reads the old object, or fails: never a mix.
	p := make([]byte, 100)
	if n, err := old.ReadAt(p, 100); err == nil && (n != 100 || !bytes.Equal(p, v1[100:200])) {
		t.Fatalf("an object opened before its replacement read %d bytes of neither version", n)
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List = %q", got)
	}
}

func testBadKeys(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	ctx := t.Context()
	for _, key := range []string{"", "/a", "a/", "a//b", ".", "..", "../a", "a/..", "a/../b", "a/./b", `a\b`, "a\x00b"} {
		if err := st.Put(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrBadKey) {
			t.Errorf("Put(%q): %v, want ErrBadKey", key, err)
		}
		if _, err := st.Open(ctx, key); !errors.Is(err, objstore.ErrBadKey) {
			t.Errorf("Open(%q): %v, want ErrBadKey", key, err)
		}
		if _, err := st.Stat(ctx, key); !errors.Is(err, objstore.ErrBadKey) {
			t.Errorf("Stat(%q): %v, want ErrBadKey", key, err)
		}
		if err := st.Delete(ctx, key); !errors.Is(err, objstore.ErrBadKey) {
			t.Errorf("Delete(%q): %v, want ErrBadKey", key, err)
		}
	}
	if got := list(t, st, ""); len(got) != 0 {
		t.Fatalf("bad keys stored %q", got)
	}
}

// testWrongSize puts bodies shorter and longer than announced, from a
// plain reader and from one that can seek: each fails and leaves no
// object, or the old one.
func testWrongSize(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	body := pattern(100, 6)
	for _, c := range []struct {
		name string
		r    func() io.Reader
		size int64
	}{
		{"short stream", func() io.Reader { return stream{bytes.NewReader(body)} }, 200},
		{"long stream", func() io.Reader { return stream{bytes.NewReader(body)} }, 50},
		{"short seeker", func() io.Reader { return bytes.NewReader(body) }, 200},
		{"long seeker", func() io.Reader { return bytes.NewReader(body) }, 50},
		{"one short", func() io.Reader { return stream{bytes.NewReader(body)} }, 101},
		{"one long", func() io.Reader { return stream{bytes.NewReader(body)} }, 99},
		{"failing", func() io.Reader {
			return io.MultiReader(bytes.NewReader(body[:50]), iotestErr{})
		}, 100},
	} {
		if err := st.Put(t.Context(), "new", c.r(), c.size); err == nil {
			t.Errorf("%s: Put of %d bytes announced as %d: no error", c.name, len(body), c.size)
		}
		notExist(t, st, "new")
		put(t, st, "old", []byte("old"))
		if err := st.Put(t.Context(), "old", c.r(), c.size); err == nil {
			t.Errorf("%s: Put over an object: no error", c.name)
		}
		if got := get(t, st, "old"); string(got) != "old" {
			t.Errorf("%s: a failed Put left %q, not the old object", c.name, got)
		}
	}
	if got := list(t, st, ""); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("List = %q", got)
	}
}

// testTempLookalike: a key shaped like the directory backend's former
// temporary files is an object like any other, and a Put beside it
// leaves it alone.
func testTempLookalike(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	put(t, st, "d/.k.tmp-1", []byte("1"))
	put(t, st, "d/k", []byte("2"))
	if got := list(t, st, "d/"); !slices.Equal(got, []string{"d/.k.tmp-1", "d/k"}) {
		t.Fatalf("List = %q", got)
	}
	if got := get(t, st, "d/.k.tmp-1"); string(got) != "1" {
		t.Fatalf("got %q", got)
	}
}

// testOddKeys: keys with characters that URLs and shells treat apart are
// stored, found and listed as they are.
func testOddKeys(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	keys := []string{"a b/c d", "date=2026-01-02/x+y.parquet", "p%20q", "q#r", "s?t=u", "ü/ß/日本", "~x", "a:b", "'\"", "-"}
	for _, k := range keys {
		put(t, st, k, []byte(k))
		if got := get(t, st, k); string(got) != k {
			t.Errorf("%q reads %q", k, got)
		}
	}
	if got, want := list(t, st, ""), slices.Sorted(slices.Values(keys)); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	for _, k := range keys {
		if err := st.Delete(t.Context(), k); err != nil {
			t.Error(err)
		}
	}
	if got := list(t, st, ""); len(got) != 0 {
		t.Errorf("after Delete, List = %q", got)
	}
}

// testBodies puts from the readers callers have: in memory, a file part
// read, a pipe's *os.File (which has Seek and ReadAt, and cannot seek).
func testBodies(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	want := pattern(5000, 8)

	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(1000, io.SeekStart); err != nil { // the rest of a file
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "file", f, 4000); err != nil {
		t.Fatalf("from a file: %v", err)
	}
	if got := get(t, st, "file"); !bytes.Equal(got, want[1000:]) {
		t.Fatal("from a file: wrong bytes")
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		_, _ = pw.Write(want)
	}()
	if err := st.Put(t.Context(), "pipe", pr, int64(len(want))); err != nil {
		t.Fatalf("from a pipe: %v", err)
	}
	if got := get(t, st, "pipe"); !bytes.Equal(got, want) {
		t.Fatal("from a pipe: wrong bytes")
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("the disk went away") }

func testCancelled(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	put(t, st, "there", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := st.Put(ctx, "k", strings.NewReader("abc"), 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Put: %v, want context.Canceled", err)
	}
	notExist(t, st, "k")
	if err := st.List(ctx, "", func(objstore.Info) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List: %v, want context.Canceled", err)
	}
}

// testStalledBody: a Put whose body stops coming ends at its context's
// deadline and stores nothing.
func testStalledBody(t *testing.T, newStore storeFunc) {
	st := newStore(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(pattern(1000, 7)) }() // then nothing
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	began := time.Now()
	err := st.Put(ctx, "k", pr, 1<<20)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Put took %v under a 1 s context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put: %v, want context.DeadlineExceeded", err)
	}
	notExist(t, st, "k")
}

// A store on a prefix sees its own keys only, relative to the prefix.
func testPrefixes(t *testing.T, srv s3test.Server) {
	o := objstore.Options{S3Endpoint: srv.Endpoint}
	base := "s3://" + srv.Bucket + "/" + strings.ReplaceAll(t.Name(), "/", ".")
	a := open(t, base+"/a", o)
	ab := open(t, base+"/ab/", o)
	whole := open(t, "s3://"+srv.Bucket, o)
	if whole.String() != "s3://"+srv.Bucket {
		t.Fatalf("String() = %q, want s3://%s", whole.String(), srv.Bucket)
	}
	if a.String() != base+"/a" || ab.String() != base+"/ab" {
		t.Fatalf("String() = %q, %q", a.String(), ab.String())
	}
	if strings.Contains(a.String(), srv.AccessKey) || strings.Contains(a.String(), srv.SecretKey) {
		t.Fatal("String() holds a credential")
	}
	put(t, a, "x", []byte("x"))
	put(t, ab, "yy", []byte("yy"))
	// A folder marker another tool made is no object of the store's.
	c, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(base, "s3://"+srv.Bucket+"/")
	if _, err := c.PutObject(t.Context(), srv.Bucket, rel+"/a/folder/", bytes.NewReader(nil), 0, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := list(t, a, ""); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("a lists %q", got)
	}
	if got := list(t, ab, ""); !slices.Equal(got, []string{"yy"}) {
		t.Fatalf("ab lists %q", got)
	}
	if _, err := whole.Stat(t.Context(), rel+"/a/x"); err != nil {
		t.Fatalf("the bucket's store does not see a's object: %v", err)
	}
	notExist(t, a, "yy")
}

func testMissingBucket(t *testing.T, srv s3test.Server) {
	_, err := objstore.Open(t.Context(), "s3://no-such-bucket/x", objstore.Options{S3Endpoint: srv.Endpoint})
	if !errors.Is(err, objstore.ErrBadURL) {
		t.Fatalf("Open: %v, want ErrBadURL", err)
	}
	for _, s := range []string{"no-such-bucket", srv.Endpoint, "does not exist"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error %q does not say %q", err, s)
		}
	}
}

func testBadS3URLs(t *testing.T, srv s3test.Server) {
	for _, c := range []struct{ url, endpoint string }{
		{"s3:///prefix", srv.Endpoint},
		{"s3://" + srv.Bucket + "/a/../b", srv.Endpoint},
		{"s3://" + srv.Bucket + "/a//b", srv.Endpoint},
		{"s3://Bad_Bucket/p", srv.Endpoint},
		{"s3://b/p", srv.Endpoint}, // too short a bucket name
		{"s3://key:secret@" + srv.Bucket + "/p", srv.Endpoint},
		{"s3://" + srv.Bucket + "/p", "127.0.0.1:9000"},
		{"s3://" + srv.Bucket + "/p", "ftp://127.0.0.1:9000"},
		{"s3://" + srv.Bucket + "/p", srv.Endpoint + "/path"},
	} {
		_, err := objstore.Open(t.Context(), c.url, objstore.Options{S3Endpoint: c.endpoint})
		if !errors.Is(err, objstore.ErrBadURL) {
			t.Errorf("Open(%q, endpoint %q): %v, want ErrBadURL", c.url, c.endpoint, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the credential: %v", c.url, err)
		}
	}
}

// TestS3ServerGone stops the server under an open store: every call fails
// within its context's deadline with an error naming the store, and Open
// names the endpoint and is no ErrBadURL (the URL may be right).
func TestS3ServerGone(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	o := objstore.Options{S3Endpoint: srv.Endpoint}
	st := open(t, "s3://"+srv.Bucket+"/gone", o)
	put(t, st, "k", []byte("abc"))
	obj, err := st.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	srv.Stop()

	const bound = 10 * time.Second
	calls := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Put", func(ctx context.Context) error { return st.Put(ctx, "k2", strings.NewReader("x"), 1) }},
		{"Open", func(ctx context.Context) error { _, err := st.Open(ctx, "k"); return err }},
		{"Stat", func(ctx context.Context) error { _, err := st.Stat(ctx, "k"); return err }},
		{"List", func(ctx context.Context) error {
			return st.List(ctx, "", func(objstore.Info) error { return nil })
		}},
		{"Delete", func(ctx context.Context) error { return st.Delete(ctx, "k") }},
		{"ReadAt", func(context.Context) error { _, err := obj.ReadAt(make([]byte, 2), 1); return err }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		began := time.Now()
		err := c.do(ctx)
		cancel()
		took := time.Since(began)
		if err == nil {
			t.Errorf("%s: no error from a stopped server", c.name)
			continue
		}
		if took > bound+2*time.Second {
			t.Errorf("%s: took %v, past the context's %v", c.name, took, bound)
		}
		if !strings.Contains(err.Error(), st.String()) {
			t.Errorf("%s: the error %q does not name %s", c.name, err, st)
		}
		if errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("%s: %v: a stopped server is no missing object", c.name, err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	_, err = objstore.Open(ctx, "s3://"+srv.Bucket+"/gone", o)
	if err == nil || errors.Is(err, objstore.ErrBadURL) || !strings.Contains(err.Error(), srv.Endpoint) {
		t.Fatalf("Open on a stopped server: %v, want an error naming %s that is no ErrBadURL", err, srv.Endpoint)
	}
	t.Log(err)
}

// TestS3Unresponsive: a server that takes connections and never answers
// holds Open only as long as its context.
func TestS3Unresponsive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // read nothing, answer nothing
		}
	}()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	endpoint := "http://" + l.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	began := time.Now()
	_, err = objstore.Open(ctx, "s3://bucket/p", objstore.Options{S3Endpoint: endpoint})
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Open took %v under a 1 s context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, objstore.ErrBadURL) || !strings.Contains(err.Error(), endpoint) {
		t.Fatalf("Open: %v, want a deadline error naming %s", err, endpoint)
	}
}

// freezer is a TCP proxy in front of a server that can be made to hang:
// after freeze, it passes no more bytes either way and answers no new
// connection, as a server that stopped responding (not one that went
// away, whose connections are refused).
type freezer struct {
	l      net.Listener
	to     string
	frozen chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
}

func newFreezer(t *testing.T, to string) *freezer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l, to: to, frozen: make(chan struct{})}
	t.Cleanup(f.close)
	go f.serve()
	return f
}

func (f *freezer) addr() string { return "http://" + f.l.Addr().String() }

func (f *freezer) freeze() { close(f.frozen) }

func (f *freezer) close() {
	f.l.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *freezer) keep(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns = append(f.conns, c)
}

func (f *freezer) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.keep(c)
		select {
		case <-f.frozen:
			continue // held open, never answered
		default:
		}
		up, err := net.Dial("tcp", f.to)
		if err != nil {
			c.Close()
			continue
		}
		f.keep(up)
		go f.pipe(up, c)
		go f.pipe(c, up)
	}
}

// pipe copies src to dst until the freeze, after which it drops what it
// reads.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			n = 0
		default:
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// testServerHangs: every call on a store whose server stopped answering
// ends at its context's deadline (an open object's reads, at the deadline
// of the context it was opened with) with an error naming the store.
func testServerHangs(t *testing.T, srv s3test.Server) {
	fr := newFreezer(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	st := open(t, "s3://"+srv.Bucket+"/hangs", objstore.Options{S3Endpoint: fr.addr()})
	put(t, st, "k", []byte("abc"))
	const bound = time.Second
	octx, ocancel := context.WithTimeout(t.Context(), 3*bound)
	defer ocancel()
	obj, err := st.Open(octx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	fr.freeze()

	for _, c := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"Put", func(ctx context.Context) error { return st.Put(ctx, "k2", strings.NewReader("x"), 1) }},
		{"Put stream", func(ctx context.Context) error { return st.Put(ctx, "k2", stream{strings.NewReader("x")}, 1) }},
		{"Open", func(ctx context.Context) error { _, err := st.Open(ctx, "k"); return err }},
		{"Stat", func(ctx context.Context) error { _, err := st.Stat(ctx, "k"); return err }},
		{"List", func(ctx context.Context) error {
			return st.List(ctx, "", func(objstore.Info) error { return nil })
		}},
		{"Delete", func(ctx context.Context) error { return st.Delete(ctx, "k") }},
		{"ReadAt", func(context.Context) error { _, err := obj.ReadAt(make([]byte, 2), 1); return err }},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		began := time.Now()
		err := c.do(ctx)
		cancel()
		if took := time.Since(began); took > 3*bound+2*time.Second {
			t.Errorf("%s: took %v on a server that hangs", c.name, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), st.String()) {
			t.Errorf("%s: %v, want a deadline error naming %s", c.name, err, st)
		}
	}
}
