package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func skipUnlessProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
}

// TestFindLocalServer listens on loopback in this process and finds this
// process through /proc from the port alone.
func TestFindLocalServer(t *testing.T) {
	skipUnlessProc(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	s, err := FindLocalServer(fmt.Sprintf("http://127.0.0.1:%d/write?db=x", port))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if s.PID != os.Getpid() || !slices.Equal(s.Argv, os.Args) || s.Cwd != wd || !slices.Contains(s.Env, "HOME="+os.Getenv("HOME")) {
		t.Fatalf("found %+v; this is pid %d, %q in %s", s, os.Getpid(), os.Args, wd)
	}
	// A wildcard listener, IPv6 if the machine has it, found from localhost.
	if ln6, err := net.Listen("tcp", "[::]:0"); err == nil {
		port6 := ln6.Addr().(*net.TCPAddr).Port
		pid, err := ListenerPID(port6)
		ln6.Close()
		if err != nil || pid != os.Getpid() {
			t.Fatalf("[::]:%d: pid %d, %v", port6, pid, err)
		}
	}
	// Not found: a closed port, a remote host.
	ln.Close()
	if _, err := ListenerPID(port); err == nil {
		t.Fatalf("port %d is closed, yet found", port)
	}
	if _, err := FindLocalServer(fmt.Sprintf("http://192.0.2.1:%d/write", port)); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("remote host: %v", err)
	}
}

// TestProcessMemory reads this process's resident size while it grows.
func TestProcessMemory(t *testing.T) {
	skipUnlessProc(t)
	rss0, hwm0, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss0 < 1<<20 || rss0 > 1<<40 || hwm0 < rss0 {
		t.Fatalf("VmRSS %d, VmHWM %d", rss0, hwm0)
	}
	w := WatchRSS(os.Getpid(), 5*time.Millisecond)
	// 64 MiB of fresh pages, outside the Go heap (which may already hold
	// resident pages it would reuse).
	const grow = 64 << 20
	b, err := syscall.Mmap(-1, 0, grow, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1 // touch every page: resident
	}
	// Stop's last sample is taken while the pages are still mapped.
	peak, hwm, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's RSS counters are per-CPU approximations synced now and
	// then, so VmHWM read later may trail a VmRSS sampled earlier by a few
	// pages per CPU: allow 4 MiB.
	if peak < rss0+grow/2 || hwm < peak-4<<20 {
		t.Fatalf("VmRSS %d MiB before, peak %d MiB after touching 64 MiB, VmHWM %d MiB", rss0>>20, peak>>20, hwm>>20)
	}
	if _, _, err := ProcessMemory(1 << 30); err == nil {
		t.Fatal("a process that does not exist has a size")
	}
}

func TestListenersTable(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:20EC 00000000:0000 0A 00000000:00000000 00:00000000 00000000   110        0 40001 1 0000000000000000 100 0 0 10 0
   1: 00000000:20EC 00000000:0000 0A 00000000:00000000 00:00000000 00000000   110        0 40002 1 0000000000000000 100 0 0 10 0
   2: 0500A8C0:20EC 00000000:0000 0A 00000000:00000000 00:00000000 00000000   110        0 40003 1 0000000000000000 100 0 0 10 0
   3: 0100007F:20EC 0100007F:B3F2 01 00000000:00000000 00:00000000 00000000  1000        0 40004 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:1E14 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 40005 1 0000000000000000 100 0 0 10 0
`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 50001 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 50002 1 0000000000000000 100 0 0 10 0
   2: B80D0120000000000000000001000000:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 50003 1 0000000000000000 100 0 0 10 0
`
	// A /proc of the two tables alone, from a little-endian machine (the
	// kernel prints the address words in its byte order, and procfs reads
	// them as little-endian).
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, table := range map[string]string{"tcp": tcp, "tcp6": tcp6} {
		if err := os.WriteFile(filepath.Join(root, "net", name), []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	// Port 8428 (0x20EC): the loopback and wildcard listeners, not the one
	// on 192.168.0.5 nor the established connection.
	if got, want := listeners(fs, 8428), []listener{{40001, 110}, {40002, 110}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("listeners %+v, want %+v", got, want)
	}
	for port, want := range map[int]uint64{8080: 50001, 8081: 50002, 8082: 0} { // ::1, ::ffff:127.0.0.1, 2001:db8::1
		got := listeners(fs, port)
		if (want == 0 && len(got) != 0) || (want != 0 && (len(got) != 1 || got[0].inode != want)) {
			t.Errorf("tcp6 port %d: %+v, want inode %d", port, got, want)
		}
	}
}

// TestServerDataDirs reads data directories off fixed command lines.
func TestServerDataDirs(t *testing.T) {
	files := map[string]string{
		"/etc/influxdb/influxdb.conf": `reporting-disabled = false
bind-address = "127.0.0.1:8088"

[meta]
  # Where the metadata/raft database is stored
  dir = "/var/lib/influxdb/meta"

[data]
  # The directory where the TSM storage engine stores TSM files.
  dir = "/var/lib/influxdb/data"
  wal-dir = '/var/lib/influxdb/wal' # single quotes
  wal-fsync-delay = "0s"

[[graphite]]
  dir = "/not/this"
`,
		"/srv/influx/custom.conf":             "[meta]\ndir = \"meta\"\n[data]\ndir=\"/big/data\"\nwal-dir = \"/fast/wal\"\n",
		"/home/bench/.influxdb/influxdb.conf": "[meta]\ndir = \"/home/bench/m\"\n[data]\ndir = \"/home/bench/d\"\nwal-dir = \"/home/bench/w\"\n",
		"/tmp/broken.conf":                    "[data]\ndir = \"/x\"\n",
	}
	readAll := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	readEtc := func(p string) ([]byte, error) { // only the packaged configuration
		if p == "/etc/influxdb/influxdb.conf" {
			return readAll(p)
		}
		return readAll("/nonexistent")
	}
	readNone := func(p string) ([]byte, error) { return readAll("/nonexistent") }
	vm, influx, hg := KindVictoriaMetrics, KindInfluxDB, KindHourglass
	for _, c := range []struct {
		argv, env []string
		cwd, home string
		read      func(string) ([]byte, error)
		kind      string
		dirs      []string
		err       string
	}{
		{argv: []string{"/usr/bin/victoria-metrics", "-storageDataPath=/var/lib/victoria-metrics", "-retentionPeriod=100y"},
			kind: vm, dirs: []string{"/var/lib/victoria-metrics"}},
		{argv: []string{"./victoria-metrics-prod", "--storageDataPath", "vm-data", "-httpListenAddr=:8428"}, cwd: "/srv",
			kind: vm, dirs: []string{"/srv/vm-data"}},
		{argv: []string{"/opt/vm/victoria-metrics-linux-amd64"}, cwd: "/home/bench",
			kind: vm, dirs: []string{"/home/bench/victoria-metrics-data"}},
		{argv: []string{"victoria-metrics", "-envflag.enable", "-envflag.prefix=VM_"}, env: []string{"VM_storageDataPath=/env/vm"},
			kind: vm, dirs: []string{"/env/vm"}},
		{argv: []string{"victoria-metrics"}, env: []string{"storageDataPath=/env/vm"}, cwd: "/",
			kind: vm, dirs: []string{"/victoria-metrics-data"}}, // the environment counts only with -envflag.enable
		{argv: []string{"victoria-metrics"}, kind: vm, err: "working directory"},
		{argv: []string{"/usr/bin/influxd", "-config", "/etc/influxdb/influxdb.conf"}, read: readAll,
			kind: influx, dirs: []string{"/var/lib/influxdb/meta", "/var/lib/influxdb/data", "/var/lib/influxdb/wal"}},
		{argv: []string{"influxd", "run", "-config=custom.conf"}, cwd: "/srv/influx", read: readAll,
			kind: influx, dirs: []string{"/srv/influx/meta", "/big/data", "/fast/wal"}},
		{argv: []string{"influxd"}, env: []string{"INFLUXDB_CONFIG_PATH=/srv/influx/custom.conf", "INFLUXDB_DATA_WAL_DIR=/env/wal"}, cwd: "/x", read: readAll,
			kind: influx, dirs: []string{"/x/meta", "/big/data", "/env/wal"}},
		{argv: []string{"influxd"}, home: "/home/bench", read: readAll, // ~/.influxdb/influxdb.conf comes first
			kind: influx, dirs: []string{"/home/bench/m", "/home/bench/d", "/home/bench/w"}},
		{argv: []string{"influxd"}, home: "/home/other", read: readEtc,
			kind: influx, dirs: []string{"/var/lib/influxdb/meta", "/var/lib/influxdb/data", "/var/lib/influxdb/wal"}},
		{argv: []string{"influxd"}, env: []string{"HOME=/home/nobody"}, read: readNone,
			kind: influx, dirs: []string{"/home/nobody/.influxdb/meta", "/home/nobody/.influxdb/data", "/home/nobody/.influxdb/wal"}},
		{argv: []string{"influxd", "-config", "/dev/null"}, home: "/root", read: readAll,
			kind: influx, dirs: []string{"/root/.influxdb/meta", "/root/.influxdb/data", "/root/.influxdb/wal"}},
		{argv: []string{"influxd", "-config", "/tmp/broken.conf"}, read: readAll, kind: influx, err: "lacks"},
		{argv: []string{"influxd", "-config", "/tmp/missing.conf"}, read: readAll, kind: influx, err: "not exist"},
		{argv: []string{"/usr/bin/hourglass", "serve", "--listen", "127.0.0.1:7700", "--data-dir", "/x"}, env: []string{"HOURGLASS_DATA_DIR=/env"},
			kind: hg, dirs: []string{"/x"}}, // the command line wins
		{argv: []string{"hourglass", "serve", "-data-dir=d"}, cwd: "/srv", kind: hg, dirs: []string{"/srv/d"}},
		{argv: []string{"hourglass", "serve"}, env: []string{"HOURGLASS_DATA_DIR=/env/hg"}, kind: hg, dirs: []string{"/env/hg"}},
		{argv: []string{"/opt/hourglass", "serve"}, cwd: "/home/bench", kind: hg, dirs: []string{"/home/bench/hourglass-data"}},
		{argv: []string{"hourglass", "serve"}, kind: hg, err: "working directory"},
		{argv: []string{"/usr/bin/hourglass", "bench", "ingest", "--data-dir", "/x"}},
		{argv: []string{"/tmp/hourglass.test", "-test.run=TestX"}},
		{argv: []string{"postgres", "-D", "/var/lib/postgresql"}},
		{argv: nil},
	} {
		read := c.read
		if read == nil {
			read = readNone
		}
		kind, dirs, err := serverDataDirs(c.argv, c.env, c.cwd, c.home, read)
		if kind != c.kind || !slices.Equal(dirs, c.dirs) || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %q %q %v; want %q %q %q", c.argv, kind, dirs, err, c.kind, c.dirs, c.err)
		}
	}
}

func TestDirsUsage(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(filepath.Join(data, "wal"), 0o755)
	if err := os.WriteFile(filepath.Join(data, "a"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "wal", "b"), []byte("x"), 0o644)
	one, err := DiskUsage(data)
	if err != nil || one < 100_000 {
		t.Fatalf("DiskUsage %d %v", one, err)
	}
	// The same directory twice, a directory within it and a hard link
	// count once.
	if err := os.Link(filepath.Join(data, "a"), filepath.Join(data, "a.link")); err != nil {
		t.Fatal(err)
	}
	if got, err := DirsUsage(filepath.Join(data, "wal"), data, data); err != nil || got != one {
		t.Fatalf("DirsUsage %d %v, want %d", got, err, one)
	}
	if _, err := DirsUsage(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing directory: %v", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	for _, c := range []struct {
		line         string
		utime, stime uint64
		err          string
	}{
		// Linux 6.x, 52 fields; utime and stime are the 14th and 15th.
		{line: "4242 (victoria-metric) S 1 4242 4242 0 -1 4194560 90112 0 3 0 1234 567 0 0 20 0 9 0 1733 1543507968 21000 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			utime: 1234, stime: 567},
		// A name with spaces and parentheses.
		{line: "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 99 1 0 0 20 0 1 0 5 0 0\n", utime: 99, stime: 1},
		{line: "7 a R 1", err: "no ')'"},
		{line: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 99", err: "fields"},
		{line: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 1 0", err: "utime"},
	} {
		u, s, err := parseStatCPU([]byte(c.line))
		if u != c.utime || s != c.stime || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %d %d %v; want %d %d %q", c.line, u, s, err, c.utime, c.stime, c.err)
		}
	}
}

// TestProcessCPU reads this process's CPU time while it spins, and checks
// it against what getrusage says.
func TestProcessCPU(t *testing.T) {
	skipUnlessProc(t)
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// 300 ms of CPU, however long a shared machine takes to give them.
	ru0, x := rusage(), 0
	for spin := time.Now(); rusage()-ru0 < 300*time.Millisecond && time.Since(spin) < time.Minute; {
		for i := range 100_000 {
			x += i * x
		}
	}
	lo, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ru := rusage()
	hi, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The kernel counts both from the same clock, /proc in whole ticks;
	// threads running elsewhere between the reads (the collector) may add
	// a few. A wrong tick rate is ten times off.
	slack := 5 * time.Second / time.Duration(ClockTicks())
	if lo-before < 250*time.Millisecond || ru < lo-slack || ru > hi+slack {
		t.Fatalf("spun 300 ms of CPU: /proc/self/stat %v, then %v, %v; getrusage %v (slack %v) %d", before, lo, hi, ru, slack, x)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Fatal("no such process, yet read")
	}
}
