package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// A LocalServer is the process behind a URL on this machine, found
// through /proc (Linux): the owner of the TCP socket listening on the URL's
// port. Reading another user's process needs that user or root; a server
// in another network namespace (a container without host networking) is
// not found.
type LocalServer struct {
	PID  int
	Argv []string // its command line
	Cwd  string   // its working directory; "" when unreadable
	Env  []string // its environment ("NAME=value"); nil when unreadable
}

// FindLocalServer returns the process listening on rawURL's port, when
// rawURL's host is a loopback address (127.0.0.0/8, ::1 or localhost).
func FindLocalServer(rawURL string) (*LocalServer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s is not a loopback address", host)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("no port in %s", rawURL)
	}
	pid, err := ListenerPID(p)
	if err != nil {
		return nil, err
	}
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	s := &LocalServer{PID: pid}
	if s.Argv, err = proc.CmdLine(); err != nil {
		return nil, err
	}
	s.Cwd, _ = proc.Cwd()
	if env, err := proc.Environ(); err == nil {
		s.Env = env
	}
	return s, nil
}

// ListenerPID returns the process that holds the TCP socket listening on
// port on a loopback or wildcard address, from the socket's inode in
// /proc/net/tcp and tcp6 and the processes' /proc/PID/fd links to it. When
// the socket is shared by several processes, the lowest PID is returned.
func ListenerPID(port int) (int, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	socks := listeners(fs, port)
	if len(socks) == 0 {
		return 0, fmt.Errorf("no socket listens on port %d on a loopback or wildcard address in this network namespace", port)
	}
	inodes := map[string]bool{}
	for _, l := range socks {
		inodes[fmt.Sprintf("socket:[%d]", l.inode)] = true
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	sort.Sort(procs) // by PID: the first holder found is the lowest
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue // another user's process, or gone
		}
		for _, t := range targets {
			if inodes[t] {
				return p.PID, nil
			}
		}
	}
	if socks[0].uid == os.Getuid() {
		return 0, fmt.Errorf("no process holds the socket listening on port %d (it may have exited)", port)
	}
	return 0, fmt.Errorf("the socket listening on port %d belongs to uid %d, whose processes uid %d cannot read", port, socks[0].uid, os.Getuid())
}

type listener struct {
	inode uint64
	uid   int
}

// tcpListen is the state LISTEN of a /proc/net/tcp line (TCP_LISTEN in
// the kernel's include/net/tcp_states.h).
const tcpListen = 0x0A

// listeners returns the sockets of fs's /proc/net/tcp and tcp6 in state
// LISTEN on port whose local address is loopback or unspecified. A table
// that cannot be read (no IPv6) is skipped.
func listeners(fs procfs.FS, port int) []listener {
	var out []listener
	for _, table := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		socks, err := table()
		if err != nil {
			continue
		}
		for _, l := range socks {
			if l.St != tcpListen || l.LocalPort != uint64(port) || !(l.LocalAddr.IsLoopback() || l.LocalAddr.IsUnspecified()) {
				continue
			}
			out = append(out, listener{inode: l.Inode, uid: int(l.UID)})
		}
	}
	return out
}

// ProcessMemory returns a process's resident size (VmRSS) and the peak of
// its resident size since it started (VmHWM), in bytes, from
// /proc/PID/status.
func ProcessMemory(pid int) (rss, hwm int64, err error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	if st.VmRSS == 0 && st.VmHWM == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS and VmHWM (a kernel thread, or a zombie)", pid)
	}
	return int64(st.VmRSS), int64(st.VmHWM), nil
}

// ProcessCPU returns the CPU time a process has spent so far, in user
// and kernel mode together (utime and stime of /proc/PID/stat, every
// thread of it, in clock ticks of ClockTicks a second).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	utime, stime, err := parseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	hz := ClockTicks()
	ticks := utime + stime
	return time.Duration(ticks/hz)*time.Second + time.Duration(ticks%hz)*time.Second/time.Duration(hz), nil
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/PID/stat line. The 2nd, the program's name in parentheses, may
// hold spaces and parentheses itself: the fields are counted from the
// last ')'.
func parseStatCPU(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' after the program's name")
	}
	// After the name: state (3rd), ppid, ..., utime (14th), stime (15th).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the program's name, want at least 13", len(f))
	}
	if utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// atClockTick is AT_CLKTCK, the key of the clock ticks a second in the
// ELF auxiliary vector (the kernel's include/uapi/linux/auxvec.h).
const atClockTick = 17

// ClockTicks returns the clock ticks a second in which /proc/PID/stat
// counts CPU time (sysconf(_SC_CLK_TCK)), which the kernel hands every
// process in its auxiliary vector (/proc/self/auxv); 100, the value on
// every Linux architecture, when it cannot be read.
func ClockTicks() uint64 { return clockTicks() }

var clockTicks = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	word := strconv.IntSize / 8
	for ; len(b) >= 2*word; b = b[2*word:] {
		var k, v uint64
		if word == 8 {
			k, v = binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		} else {
			k, v = uint64(binary.NativeEndian.Uint32(b)), uint64(binary.NativeEndian.Uint32(b[4:]))
		}
		if k == atClockTick && v > 0 {
			return v
		}
	}
	return 100
})

// RSSWatch samples a process's resident size until stopped.
type RSSWatch struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak int64
	err  error
}

// WatchRSS starts sampling pid's VmRSS every interval.
func WatchRSS(pid int, every time.Duration) *RSSWatch {
	w := &RSSWatch{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	w.sample()
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *RSSWatch) sample() {
	rss, _, err := ProcessMemory(w.pid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	w.peak = max(w.peak, rss)
}

// Stop takes a last sample and ends the watch. It returns the highest
// VmRSS sampled and the process's VmHWM now; err is the first failed
// sample (the process may have exited).
func (w *RSSWatch) Stop() (peakRSS, hwm int64, err error) {
	close(w.stop)
	<-w.done
	w.sample()
	_, hwm, herr := ProcessMemory(w.pid)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak, hwm, errors.Join(w.err, herr)
}

// Kinds of LocalServer.DataDirs.
const (
	KindVictoriaMetrics = "VictoriaMetrics"
	KindInfluxDB        = "InfluxDB 1.x"
	KindHourglass       = "Hourglass"
)

// DataDirs returns what kind of server s is and the directories its data
// is in, from its command line (and its environment and configuration
// file where they count), when it is one that it knows:
//
//   - VictoriaMetrics: -storageDataPath (default victoria-metrics-data in
//     its working directory);
//   - InfluxDB 1.x (influxd): [meta] dir, [data] dir and [data] wal-dir of
//     its configuration file (-config, else $INFLUXDB_CONFIG_PATH, else
//     ~/.influxdb/influxdb.conf or /etc/influxdb/influxdb.conf, whichever
//     exists first, else ~/.influxdb/{meta,data,wal}); the environment
//     variables INFLUXDB_META_DIR, INFLUXDB_DATA_DIR and
//     INFLUXDB_DATA_WAL_DIR override them;
//   - Hourglass ("hourglass serve"): --data-dir, else
//     $HOURGLASS_DATA_DIR, else hourglass-data in its working directory.
//
// kind is "" for any other server.
func (s *LocalServer) DataDirs() (kind string, dirs []string, err error) {
	home := ""
	if p, err := procfs.NewProc(s.PID); err == nil {
		if st, err := p.NewStatus(); err == nil {
			if u, err := user.LookupId(strconv.FormatUint(st.UIDs[0], 10)); err == nil {
				home = u.HomeDir
			}
		}
	}
	return serverDataDirs(s.Argv, s.Env, s.Cwd, home, os.ReadFile)
}

// serverDataDirs is DataDirs on a given command line, environment, working
// directory, home directory (of the server's user; "" when unknown: then
// $HOME) and files.
func serverDataDirs(argv, env []string, cwd, home string, readFile func(string) ([]byte, error)) (kind string, dirs []string, err error) {
	if len(argv) == 0 {
		return "", nil, nil
	}
	getenv := func(name string) string {
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v
			}
		}
		return ""
	}
	if home == "" {
		home = getenv("HOME")
	}
	abs := func(p string) (string, error) {
		switch {
		case filepath.IsAbs(p):
			return filepath.Clean(p), nil
		case cwd == "":
			return "", fmt.Errorf("%q is relative to the server's working directory, which cannot be read", p)
		}
		return filepath.Join(cwd, p), nil
	}
	name := filepath.Base(argv[0])
	args := argv[1:]
	if strings.HasPrefix(name, "hourglass") && len(args) > 0 && args[0] == "serve" {
		// The command line wins over the environment, as in serve.
		v, ok := flagValue(args[1:], "data-dir")
		if !ok || v == "" {
			v = getenv("HOURGLASS_DATA_DIR")
		}
		if v == "" {
			v = "hourglass-data"
		}
		d, err := abs(v)
		if err != nil {
			return KindHourglass, nil, err
		}
		return KindHourglass, []string{d}, nil
	}
	if v, ok := flagValue(args, "storageDataPath"); ok || strings.HasPrefix(name, "victoria-metrics") {
		if !ok {
			v = "victoria-metrics-data"
			// With -envflag.enable, flags may come from the environment.
			if boolFlag(args, "envflag.enable") {
				prefix, _ := flagValue(args, "envflag.prefix")
				if ev := getenv(prefix + "storageDataPath"); ev != "" {
					v = ev
				}
			}
		}
		d, err := abs(v)
		if err != nil {
			return KindVictoriaMetrics, nil, err
		}
		return KindVictoriaMetrics, []string{d}, nil
	}
	if name != "influxd" {
		return "", nil, nil
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	conf, _ := flagValue(args, "config")
	if conf == "" {
		conf = getenv("INFLUXDB_CONFIG_PATH")
	}
	if conf == "" {
		for _, p := range []string{filepath.Join(home, ".influxdb/influxdb.conf"), "/etc/influxdb/influxdb.conf"} {
			if home == "" && !filepath.IsAbs(p) {
				continue
			}
			if _, err := readFile(p); err == nil {
				conf = p
				break
			}
		}
	}
	var meta, data, wal string
	if conf == "" || conf == os.DevNull {
		if home == "" {
			return KindInfluxDB, nil, errors.New("influxd runs without a configuration file, in its user's home directory, which is unknown")
		}
		meta, data, wal = filepath.Join(home, ".influxdb/meta"), filepath.Join(home, ".influxdb/data"), filepath.Join(home, ".influxdb/wal")
	} else {
		p, err := abs(conf)
		if err != nil {
			return KindInfluxDB, nil, err
		}
		b, err := readFile(p)
		if err != nil {
			return KindInfluxDB, nil, err
		}
		t := parseTOMLStrings(b)
		meta, data, wal = t["meta.dir"], t["data.dir"], t["data.wal-dir"]
	}
	for _, o := range []struct {
		v   *string
		env string
	}{{&meta, "INFLUXDB_META_DIR"}, {&data, "INFLUXDB_DATA_DIR"}, {&wal, "INFLUXDB_DATA_WAL_DIR"}} {
		if v := getenv(o.env); v != "" {
			*o.v = v
		}
	}
	for _, d := range []string{meta, data, wal} {
		if d == "" {
			return KindInfluxDB, nil, fmt.Errorf("%s lacks [meta] dir, [data] dir or [data] wal-dir", conf)
		}
		p, err := abs(d)
		if err != nil {
			return KindInfluxDB, nil, err
		}
		dirs = append(dirs, p)
	}
	return KindInfluxDB, dirs, nil
}

// flagValue finds a Go-style flag in args: -name=v, --name=v, -name v or
// --name v (a boolean -name gives ""), before any "--".
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if len(a) == len(args[i]) {
			continue // not a flag
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				return args[i+1], true
			}
			return "", true
		}
	}
	return "", false
}

// boolFlag reports whether a Go-style boolean flag is set in args: -name,
// --name or -name=true (1, t, T, TRUE, True).
func boolFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-"+name || a == "--"+name {
			return true
		}
		for _, p := range []string{"-", "--"} {
			if v, ok := strings.CutPrefix(a, p+name+"="); ok {
				b, err := strconv.ParseBool(v)
				return err == nil && b
			}
		}
	}
	return false
}

// parseTOMLStrings reads the string values of a TOML file's tables, as
// "table.key" (the few keys of an InfluxDB configuration it needs, not
// TOML in general).
func parseTOMLStrings(b []byte) map[string]string {
	out := map[string]string{}
	table := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#':
			continue
		case line[0] == '[':
			table = strings.TrimSpace(strings.Trim(strings.SplitN(line, "#", 2)[0], "[] \t"))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.Trim(strings.TrimSpace(k), `"`), strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(v, `"`):
			if end := strings.Index(v[1:], `"`); end >= 0 {
				if s, err := strconv.Unquote(v[:end+2]); err == nil {
					v = s
				}
			}
		case strings.HasPrefix(v, "'"):
			if end := strings.Index(v[1:], "'"); end >= 0 {
				v = v[1 : end+1]
			}
		default:
			v = strings.TrimSpace(strings.SplitN(v, "#", 2)[0])
		}
		out[table+"."+k] = v
	}
	return out
}

// DirsUsage returns the bytes allocated on disk by the files under dirs,
// as `du -scB1` counts them: a file linked in several places, or a
// directory inside another one given, counts once. A file removed during
// the walk (a server merging its files) is skipped; any other error, a
// directory that cannot be read in particular, is returned.
func DirsUsage(dirs ...string) (int64, error) {
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	var total int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && path != dir {
					return nil
				}
				return err
			}
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok {
				total += info.Size()
				return nil
			}
			id := fileID{uint64(st.Dev), uint64(st.Ino)}
			if seen[id] {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			seen[id] = true
			total += st.Blocks * 512
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
