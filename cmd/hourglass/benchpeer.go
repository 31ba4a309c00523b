package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

const (
	// rssEvery is how often a local target's resident size is sampled.
	rssEvery = 100 * time.Millisecond
	// maxSettle bounds the wait for a local target's size on disk to
	// settle.
	maxSettle = 5 * time.Minute
)

// peerWatch measures the process behind a local influx= target: its
// resident size during the load, and afterwards the size of its data
// directories when they are known.
type peerWatch struct {
	srv    *bench.LocalServer
	rss    *bench.RSSWatch
	kind   string
	dirs   []string
	dirErr error
	before int64
}

// watchPeer finds the process listening on writeURL's port on this
// machine and starts sampling its resident size.
func watchPeer(writeURL string) (*peerWatch, error) {
	srv, err := bench.FindLocalServer(writeURL)
	if err != nil {
		return nil, err
	}
	if _, _, err := bench.ProcessMemory(srv.PID); err != nil {
		return nil, err
	}
	p := &peerWatch{srv: srv}
	p.kind, p.dirs, p.dirErr = srv.DataDirs()
	if p.dirErr == nil && len(p.dirs) > 0 {
		p.before, p.dirErr = bench.DirsUsage(p.dirs...)
	}
	p.rss = bench.WatchRSS(srv.PID, rssEvery)
	return p, nil
}

// name is the server's program and kind, for the report.
func (p *peerWatch) name() string {
	n := "?"
	if len(p.srv.Argv) > 0 {
		n = filepath.Base(p.srv.Argv[0])
	}
	if p.kind != "" {
		n += ", " + p.kind
	}
	return n
}

// finish measures the data directories after a load (when loaded is
// set: the load ran to its end or its --duration), stops the sampling,
// and fills the report's peak RSS and size columns. Nothing here fails
// the run: what cannot be measured is left empty, with a note on stderr.
func (p *peerWatch) finish(ctx context.Context, cfg *benchConfig, writeURL string, loaded bool, rep *targetReport, stderr io.Writer) {
	note := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%s] "+format+"\n", append([]any{rep.Target}, args...)...)
	}
	rep.PID, rep.Server = p.srv.PID, p.name()
	switch {
	case !loaded:
	case p.dirErr != nil:
		note("bytes/point not measured: pid %d (%s): %v", p.srv.PID, p.name(), p.dirErr)
	case len(p.dirs) == 0:
		note("bytes/point not measured: pid %d (%s) is not a server whose data directory is known", p.srv.PID, p.name())
	default:
		p.measureDisk(ctx, cfg, writeURL, rep, note)
	}
	peak, hwm, err := p.rss.Stop()
	if err != nil {
		note("resident size of pid %d: %v", p.srv.PID, err)
	}
	rep.PeakRSSMiB, rep.VmHWMMiB = peak>>20, hwm>>20
}

func (p *peerWatch) measureDisk(ctx context.Context, cfg *benchConfig, writeURL string, rep *targetReport, note func(string, ...any)) {
	flushed := ""
	if p.kind == bench.KindVictoriaMetrics {
		u, _ := url.Parse(writeURL)
		flush := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/internal/force_flush"}).String()
		if err := forceFlush(ctx, flush); err != nil {
			note("%s: %v; measuring anyway", flush, err)
		} else {
			flushed = " (flushed with /internal/force_flush first)"
		}
	}
	var n int64
	var err error
	waited := time.Duration(0)
	if cfg.settle > 0 {
		// Background flushes and merges go on after a load: take the size
		// once it has stayed the same for cfg.settle.
		note("waiting for the size of %s (pid %d, %s) to stay the same for %v", strings.Join(p.dirs, ", "), p.srv.PID, p.name(), cfg.settle)
	}
	var st bench.Settled
	st, err = bench.SettleUsage(ctx, p.dirs, bench.SettleConfig{Quiet: cfg.settle, Max: maxSettle})
	if ctx.Err() != nil {
		return
	}
	n, waited = st.Bytes, st.Waited.Round(100*time.Millisecond)
	if st.TimedOut {
		note("the size was still changing after %v; measured anyway", maxSettle)
	}
	if err != nil {
		note("bytes/point not measured: %v", err)
		return
	}
	rep.DataDirs, rep.DiskBytes, rep.DiskBytesBefore = p.dirs, n, p.before
	if rep.Points > 0 {
		rep.BytesPerPoint = float64(n) / float64(rep.Points)
	}
	note("%d bytes on disk in %s, %v after the load%s", n, strings.Join(p.dirs, ", "), waited, flushed)
	if p.before > 1<<20 {
		note("the data directory held %.1f MiB before the load: bytes/point counts it too; start the server on an empty one", float64(p.before)/(1<<20))
	}
}

// forceFlush asks VictoriaMetrics to write its in-memory data to disk.
func forceFlush(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
