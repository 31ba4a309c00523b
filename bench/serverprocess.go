package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A ServerProcess is an "hourglass serve" child process listening on a
// loopback port chosen by the kernel, started by StartServer. Its log
// (JSON lines on stderr) is kept, the last 256 KiB of it, for reports.
type ServerProcess struct {
	URL   string // http://127.0.0.1:port
	Mongo string // the MongoDB listener's host:port, "" when off
	PID   int

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and its log is read
	err  error         // cmd.Wait's, once done is closed

	mu  sync.Mutex // guards log
	log []byte
}

// serverLogKeep is how much of a server's log is kept: enough for the
// lines around a crash without holding a long run's log.
const serverLogKeep = 256 << 10

// StartServer runs binary ("hourglass") as "serve" on 127.0.0.1:0 (its
// MongoDB listener on another free loopback port, so that runs side by
// side do not contend for 27017) with the data in dataDir and the extra
// flags, and returns once it logs that it is
// serving. ctx bounds the start only; the process runs until Kill or
// Stop.
func StartServer(ctx context.Context, binary, dataDir string, extra ...string) (*ServerProcess, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--mongo-listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &ServerProcess{PID: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	addr := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.mu.Lock()
			s.log = append(s.log, line...)
			s.log = append(s.log, '\n')
			if len(s.log) > 2*serverLogKeep {
				s.log = append(s.log[:0], s.log[len(s.log)-serverLogKeep:]...)
			}
			s.mu.Unlock()
			var rec struct {
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
				Mongo  string `json:"mongo_listen"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "hourglass serving" {
				select {
				case addr <- [2]string{rec.Listen, rec.Mongo}:
				default:
				}
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case a := <-addr:
		s.URL, s.Mongo = "http://"+a[0], a[1]
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("server exited at start (%v):\n%s", s.err, s.Log(4<<10))
	case <-ctx.Done():
		s.Kill()
		return nil, fmt.Errorf("server did not start: %w\n%s", ctx.Err(), s.Log(4<<10))
	}
}

// Log returns the last n bytes of the server's log.
func (s *ServerProcess) Log(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.log
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Exited reports whether the process has exited.
func (s *ServerProcess) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to exit. Killing a process
// that has exited is harmless.
func (s *ServerProcess) Kill() {
	if !s.Exited() {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills
// the process. It returns the exit error of a process that did not stop
// cleanly.
func (s *ServerProcess) Stop(timeout time.Duration) error {
	if s.Exited() {
		return s.err
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.err
	case <-time.After(timeout):
		s.Kill()
		return errors.New("the server did not stop within " + timeout.String() + " of SIGTERM: killed")
	}
}
