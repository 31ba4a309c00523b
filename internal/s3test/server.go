// Package s3test starts a real S3 server on loopback for tests: SeaweedFS's
// weed (https://github.com/seaweedfs/seaweedfs, Apache-2.0), built once
// into a cache outside the repository (Build, make deps) and never part of
// Hourglass's go.mod.
//
// Usage:
//
//	srv := s3test.Start(t) // stopped at t.Cleanup
//	srv.Setenv(t)          // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
//	st, err := objstore.Open(ctx, "s3://"+srv.Bucket+"/x", objstore.Options{S3Endpoint: srv.Endpoint})
//
// Without the binary and the means to build it, Start skips the test, or
// fails it when CI is set, so that CI cannot pass by running nothing.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Server is a running SeaweedFS with an S3 gateway, one identity and one
// empty bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Bucket    string
	// Pid is the weed process, the leader of its own process group.
	Pid int

	stop func()
}

// Stop stops the server (its whole process group) and waits for it. Start
// registers it with t.Cleanup; calling it earlier (a test of a server that
// went away) is harmless, and so is calling it twice.
func (s Server) Stop() { s.stop() }

// Setenv points the AWS environment objstore reads at the server, for the
// test (t.Setenv: not in parallel tests).
func (s Server) Setenv(t testing.TB) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
}

// Bucket is the bucket Start creates.
const Bucket = "hourglass-test"

// startTimeout bounds a start, which takes a few seconds on a 2-core
// machine; the rest is room for a loaded CI run.
const startTimeout = 60 * time.Second

// Start builds weed if the cache lacks it, starts `weed mini` (master,
// volume server, filer, S3 gateway) on free loopback ports with a data
// directory of its own, waits until an object can be written, and stops it
// at t.Cleanup.
func Start(t testing.TB) Server {
	t.Helper()
	bin, err := Binary()
	if err == nil && !executable(bin) {
		t.Logf("s3test: building SeaweedFS %s into %s (minutes, once; make deps does it ahead)", Version, bin)
		bin, err = Build()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("s3test: no SeaweedFS to run: %v", err)
		}
		t.Skipf("s3test: no SeaweedFS to run (run make deps): %v", err)
	}
	var last error
	for range 3 { // a free port can be taken between choosing it and binding it
		srv, err := start(t, bin)
		if err == nil {
			return srv
		}
		last = err
	}
	t.Fatalf("s3test: %v", last)
	return Server{}
}

func start(t testing.TB, bin string) (Server, error) {
	t.Helper()
	sweep()
	// A short directory of its own, not t.TempDir: weed puts Unix sockets
	// in it, whose paths must stay under 108 bytes.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return Server{}, err
	}
	ports, err := freePorts(8)
	if err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	if err := writeOwner(dir, ports); err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	srv := Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(ports[6]),
		AccessKey: "hg" + randomHex(8),
		SecretKey: randomHex(20),
		Bucket:    Bucket,
	}
	conf, err := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "hourglass-test",
		"credentials": []any{map[string]string{"accessKey": srv.AccessKey, "secretKey": srv.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), conf, 0o600); err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	logPath := filepath.Join(dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return Server{}, err
	}
	p := strconv.Itoa
	// weed mini: master, volume server, filer and S3 gateway in one
	// process, and its filer announces itself at once where weed server's
	// waits some seconds for peers a single-host cluster does not have.
	cmd := exec.Command(bin, "mini",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-dir="+filepath.Join(dir, "data"),
		"-master.port="+p(ports[0]), "-master.port.grpc="+p(ports[1]),
		// Small volumes: the default is sized from the free disk space.
		"-master.volumeSizeLimitMB=64",
		"-master.telemetry=false",
		"-volume.port="+p(ports[2]), "-volume.port.grpc="+p(ports[3]),
		"-volume.preStopSeconds=0",
		"-filer.port="+p(ports[4]), "-filer.port.grpc="+p(ports[5]),
		"-filer.localSocket="+filepath.Join(dir, "filer.sock"),
		"-s3.port="+p(ports[6]), "-s3.port.grpc="+p(ports[7]),
		"-s3.localSocket="+filepath.Join(dir, "s3.sock"),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config="+filepath.Join(dir, "s3.json"),
		// A PUT into a missing bucket must fail, as on AWS.
		"-s3.autoCreateBucket=false",
		"-webdav=false", "-admin.ui=false",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, to stop whatever it starts; killed with the
	// test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return Server{}, err
	}
	srv.Pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	var once sync.Once
	srv.stop = func() {
		once.Do(func() {
			pg := -cmd.Process.Pid
			_ = syscall.Kill(pg, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(pg, syscall.SIGKILL)
				<-exited
			}
			_ = syscall.Kill(pg, syscall.SIGKILL) // anything of the group left behind
			logf.Close()
			removeSockets(ports)
			os.RemoveAll(dir)
		})
	}

	began := time.Now()
	if err := ready(srv, exited); err != nil {
		log, _ := os.ReadFile(logPath)
		srv.stop()
		return Server{}, fmt.Errorf("weed mini on %s: %w\n%s", srv.Endpoint, err, tail(string(log), 4000))
	}
	t.Logf("s3test: SeaweedFS S3 on %s ready in %v", srv.Endpoint, time.Since(began).Round(time.Millisecond))
	t.Cleanup(srv.stop)
	return srv, nil
}

// ready waits until the server creates the bucket and stores an object in
// it (the S3 gateway answers before a volume server has joined the master).
func ready(srv Server, exited <-chan struct{}) error {
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited while starting")
		default:
		}
		last = probe(c, srv.Bucket)
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %w", startTimeout, last)
}

func probe(c *minio.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return err
		}
	}
	const key = "s3test-probe"
	if _, err := c.PutObject(ctx, bucket, key, strings.NewReader("ok"), 2, minio.PutObjectOptions{}); err != nil {
		return err
	}
	return c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{})
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dirPrefix names a server's directory in os.TempDir.
const dirPrefix = "s3test-"

// writeOwner notes in dir the test binary that runs the server and the
// ports it has, for sweep.
func writeOwner(dir string, ports []int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", os.Getpid())
	for _, p := range ports {
		fmt.Fprintf(&b, " %d", p)
	}
	return os.WriteFile(filepath.Join(dir, "owner"), []byte(b.String()), 0o644)
}

// sweep removes what servers of test binaries that died without their
// cleanup (a test timeout, a kill) left: their directories and sockets.
// Their weed processes died with them (Pdeathsig).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue // not ours, or being made
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its test binary is alive
		}
		var ports []int
		for _, s := range f[1:] {
			if p, err := strconv.Atoi(s); err == nil {
				ports = append(ports, p)
			}
		}
		removeSockets(ports)
		_ = os.RemoveAll(dir)
	}
}

// removeSockets removes the gRPC Unix sockets weed makes for ports: it
// names them /tmp/seaweedfs-<service>-grpc-<port>.sock whatever -dir is,
// and leaves some behind.
func removeSockets(ports []int) {
	for _, svc := range []string{"master", "volume", "filer", "s3"} {
		for _, port := range ports {
			_ = os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", svc, port))
		}
	}
}
