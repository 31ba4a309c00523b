package s3test_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hourglassdb/hourglass/internal/s3test"
)

// TestStart starts a server, writes through its S3 API with its
// credentials, and checks that Stop leaves no process, port or file.
func TestStart(t *testing.T) {
	// What a test binary killed before its cleanup left, which Start
	// removes: its directory and weed's sockets.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("%d 1 2", dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(stale, "owner"), []byte(owner), 0o644); err != nil {
		t.Fatal(err)
	}
	alive, err := os.MkdirTemp("", "s3test-") // a running test binary's: kept
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(alive)
	if err := os.WriteFile(filepath.Join(alive, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := "/tmp/seaweedfs-master-grpc-2.sock"
	if err := os.WriteFile(sock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(sock)

	srv := s3test.Start(t)
	if _, err := os.Stat(alive); err != nil {
		t.Errorf("the directory of a live test binary's server was removed: %v", err)
	}
	for _, p := range []string{stale, sock} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, left by a dead test binary, is still there: %v", p, err)
		}
	}
	c, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if ok, err := c.BucketExists(ctx, srv.Bucket); err != nil || !ok {
		t.Fatalf("bucket %s: %v, %v", srv.Bucket, ok, err)
	}
	if _, err := c.PutObject(ctx, srv.Bucket, "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wrong credentials are refused: the server checks signatures.
	bad, _ := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, "not-the-secret", ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if _, err := bad.StatObject(ctx, srv.Bucket, "k", minio.StatObjectOptions{}); err == nil {
		t.Fatal("a wrong secret key was accepted")
	}
	// A missing bucket stays missing: a PUT does not create it.
	if _, err := c.PutObject(ctx, "no-such-bucket", "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err == nil {
		t.Fatal("a PUT created a bucket")
	}

	dir := procDir(t, srv.Pid)
	srv.Stop()
	srv.Stop()
	if err := syscall.Kill(srv.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("weed (pid %d) is still there after Stop: %v", srv.Pid, err)
	}
	if err := syscall.Kill(-srv.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("weed's process group %d is still there after Stop: %v", srv.Pid, err)
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.Endpoint, "http://"), time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("%s still answers after Stop", srv.Endpoint)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's directory %s is still there: %v", dir, err)
	}
	_, err = c.BucketExists(context.Background(), srv.Bucket)
	if err == nil {
		t.Error("the stopped server answered")
	}
}

// procDir is the working directory of the process pid: the server's own
// temporary directory.
func procDir(t *testing.T, pid int) string {
	t.Helper()
	dir, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
