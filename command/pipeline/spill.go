package pipeline

import (
	"bufio"
	"container/heap"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// spillOptions say where a sort that may spill writes its runs, and who
// else closes them.
type spillOptions struct {
	dir   string // "": os.TempDir()
	files *Spills
}

// Spills tracks the files of the sorts that spill in one pipeline, so
// that a pipeline given up before its end (a cursor killed, a client
// gone) closes them at once rather than when they are collected. The zero
// value is ready; it is safe for concurrent use, and Close may be called
// more than once.
type Spills struct {
	mu   sync.Mutex // guards runs
	runs []*run
}

func (s *Spills) add(r *run) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.runs = append(s.runs, r)
	s.mu.Unlock()
}

// Close closes every run spilled so far (their files are unlinked: the
// space goes with them).
func (s *Spills) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	runs := s.runs
	s.runs = nil
	s.mu.Unlock()
	closeRuns(runs)
}

func init() {
	// The values of a Doc, as gob carries them in an interface.
	gob.Register(map[string]any{})
	gob.Register([]any{})
	gob.Register(time.Time{})
	gob.Register(partialfilter.Decimal128{})
	gob.Register(partialfilter.ObjectID{})
	gob.Register(partialfilter.Regex{})
	gob.Register(partialfilter.Binary{})
	gob.Register(&document.Order{})
}

// maxOpenRuns bounds the runs a sort keeps open at once: at this many it
// merges them into one, so that a sort of any size holds a few dozen files
// open (each a descriptor and a 64 KiB read buffer). A variable for tests.
var maxOpenRuns = 64

// mergeRuns merges runs, in order, into one new run and closes them
// (ties keep the earlier run's document first).
func mergeRuns(sp *spillOptions, runs []*run, o order) (*run, error) {
	defer closeRuns(runs)
	rw, err := newRunWriter(sp)
	if err != nil {
		return nil, err
	}
	m := newRunMerge(runs, nil, o)
	for {
		d, err := m.next()
		if err == nil && d == nil {
			return rw.finish()
		}
		if err == nil {
			err = rw.enc.Encode(d)
		}
		if err != nil {
			rw.f.Close()
			return nil, mongoerr.New(mongoerr.InternalError, "sort: merge spilled runs: %v", err)
		}
	}
}

// run is a sorted run of documents in a file of its own, unlinked at
// once: the file goes when it is closed (or the process ends).
type run struct {
	f   *os.File
	dec *gob.Decoder
}

// runWriter writes a run to a new temporary file, unlinked at once.
type runWriter struct {
	f     *os.File
	w     *bufio.Writer
	enc   *gob.Encoder
	files *Spills // nil: none
}

func newRunWriter(sp *spillOptions) (*runWriter, error) {
	f, err := os.CreateTemp(sp.dir, "hourglass-sort-*")
	if err != nil {
		return nil, mongoerr.New(mongoerr.InternalError, "sort: spill to disk: %v", err)
	}
	os.Remove(f.Name()) // the open file stays readable
	w := bufio.NewWriterSize(f, 256<<10)
	return &runWriter{f: f, w: w, enc: gob.NewEncoder(w), files: sp.files}, nil
}

// finish flushes the run and opens it for reading from its start.
func (rw *runWriter) finish() (*run, error) {
	err := rw.w.Flush()
	if err == nil {
		_, err = rw.f.Seek(0, io.SeekStart)
	}
	if err != nil {
		rw.f.Close()
		return nil, mongoerr.New(mongoerr.InternalError, "sort: spill to disk: %v", err)
	}
	r := &run{f: rw.f, dec: gob.NewDecoder(bufio.NewReaderSize(rw.f, 64<<10))}
	rw.files.add(r)
	return r, nil
}

// writeRun writes docs, sorted, to a new run.
func writeRun(sp *spillOptions, docs []Doc) (*run, error) {
	rw, err := newRunWriter(sp)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if err := rw.enc.Encode(d); err != nil {
			rw.f.Close()
			return nil, mongoerr.New(mongoerr.InternalError, "sort: spill %d documents to disk: %v", len(docs), err)
		}
	}
	return rw.finish()
}

// next reads the run's next document; nil at its end.
func (r *run) next() (Doc, error) {
	var d Doc
	if err := r.dec.Decode(&d); err == io.EOF {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sort: read a spilled run: %w", err)
	}
	return d, nil
}

func closeRuns(runs []*run) {
	for _, r := range runs {
		r.f.Close()
	}
}

// runMerge merges sorted runs, the spilled ones and the last in memory,
// into one order; of documents that tie, the one read first (the earlier
// run) comes first, so that the sort stays stable.
type runMerge struct {
	order order
	runs  []*run
	mem   []Doc // the last run, in memory
	heads mergeHeap
	ready bool
}

type mergeHead struct {
	doc Doc
	src int // the run's index; len(runs) is the one in memory
}

type mergeHeap struct {
	h     []mergeHead
	order order
}

func (m *mergeHeap) Len() int { return len(m.h) }
func (m *mergeHeap) Less(i, j int) bool {
	if c := m.order.compare(m.h[i].doc, m.h[j].doc); c != 0 {
		return c < 0
	}
	return m.h[i].src < m.h[j].src
}
func (m *mergeHeap) Swap(i, j int) { m.h[i], m.h[j] = m.h[j], m.h[i] }
func (m *mergeHeap) Push(x any)    { m.h = append(m.h, x.(mergeHead)) }
func (m *mergeHeap) Pop() any {
	x := m.h[len(m.h)-1]
	m.h = m.h[:len(m.h)-1]
	return x
}

func newRunMerge(runs []*run, mem []Doc, o order) *runMerge {
	return &runMerge{order: o, runs: runs, mem: mem, heads: mergeHeap{order: o}}
}

// read returns the next document of run src.
func (m *runMerge) read(src int) (Doc, error) {
	if src == len(m.runs) {
		if len(m.mem) == 0 {
			return nil, nil
		}
		d := m.mem[0]
		m.mem[0] = nil
		m.mem = m.mem[1:]
		return d, nil
	}
	return m.runs[src].next()
}

func (m *runMerge) next() (Doc, error) {
	if !m.ready {
		m.ready = true
		for src := range len(m.runs) + 1 {
			d, err := m.read(src)
			if err != nil {
				closeRuns(m.runs)
				return nil, err
			}
			if d != nil {
				m.heads.h = append(m.heads.h, mergeHead{doc: d, src: src})
			}
		}
		heap.Init(&m.heads)
	}
	if m.heads.Len() == 0 {
		closeRuns(m.runs)
		m.runs = nil
		return nil, nil
	}
	top := m.heads.h[0]
	d, err := m.read(top.src)
	switch {
	case err != nil:
		closeRuns(m.runs)
		return nil, err
	case d != nil:
		m.heads.h[0].doc = d
		heap.Fix(&m.heads, 0)
	default:
		heap.Pop(&m.heads)
	}
	return top.doc, nil
}
