package replset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/timeseries/wal"
)

// cpuBatch returns an insert command of n measurements shaped like TSBS
// cpu-only: 100 hosts, 10 float fields, 10 s apart, a fixed seed.
func cpuBatch(n int) *Command {
	rng := rand.New(rand.NewPCG(1, 1))
	names := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
		"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	ms := make([]model.Measurement, n)
	for i := range ms {
		fs := make([]model.Field, len(names))
		for j, name := range names {
			fs[j] = model.Field{Name: name, Value: model.Float(float64(rng.IntN(10000)) / 100)}
		}
		ms[i] = model.Measurement{Time: t0 + int64(i/100)*10e9,
			Meta: map[string]any{"hostname": fmt.Sprintf("host_%d", i%100), "region": "eu-west-1"}, Fields: fs}
	}
	return &Command{Op: OpInsert, Collection: "cpu", Measurements: ms}
}

type nopFSM struct{}

var errNoSnapshots = errors.New("the benchmark's state machine takes no snapshots")

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errNoSnapshots }
func (nopFSM) Restore(rc io.ReadCloser) error      { rc.Close(); return errNoSnapshots }

// benchRaft starts a set of size members with Pebble log stores and a
// state machine that does nothing, and returns its leader.
func benchRaft(b *testing.B, size int) *raft.Raft {
	var rafts []*raft.Raft
	var conf raft.Configuration
	for i := range size {
		dir := b.TempDir()
		s, err := openLogStore(filepath.Join(dir, "raft"), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		c := raft.DefaultConfig()
		c.LocalID = raft.ServerID(fmt.Sprint(i))
		c.Logger = hclog.NewNullLogger()
		c.SnapshotThreshold = 1 << 62
		r, err := raft.NewRaft(c, nopFSM{}, s, s, raft.NewDiscardSnapshotStore(), tr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Shutdown().Error(); tr.Close(); s.Close() })
		rafts = append(rafts, r)
		conf.Servers = append(conf.Servers, raft.Server{ID: c.LocalID, Address: tr.LocalAddr()})
	}
	if err := rafts[0].BootstrapCluster(conf).Error(); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range rafts {
			if r.State() == raft.Leader {
				return r
			}
		}
	}
	b.Fatal("no leader")
	return nil
}

// BenchmarkLogAppend appends the same encoded insert batch (1000 cpu-only
// measurements, 267 KB) to a raft log (committed by a majority of 1
// or 3 members over loopback, each with a synced Pebble log store, the
// state machine doing nothing) and to the engine's own log (fdatasync,
// S2 or uncompressed), from 8 writers. MB/s counts batch bytes; points/s
// counts 10 fields per measurement.
//
// go test -run XXX -bench LogAppend -benchtime 2s ./replset/
// on 2 cores shared by all members: see docs/replication.md.
func BenchmarkLogAppend(b *testing.B) {
	data, err := cpuBatch(1000).encode(nil)
	if err != nil {
		b.Fatal(err)
	}
	const points = 1000 * 10
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("raft/members=%d", size), func(b *testing.B) {
			r := benchRaft(b, size)
			parallel(b, len(data), points, func() error { return r.Apply(data, 10*time.Second).Error() })
		})
	}
	for _, c := range []wal.Compression{wal.CompressionS2, wal.CompressionNone} {
		b.Run("wal/"+c.String(), func(b *testing.B) {
			l, err := wal.Open(wal.Options{Dir: b.TempDir(), Compression: c})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			parallel(b, len(data), points, func() error { _, err := l.Append(data); return err })
		})
	}
}

// BenchmarkInsert inserts 1000 cpu-only measurements per call from 8
// writers: into an engine alone, and through a set of 1 or 3 members
// (raft log, then each member's engine and its own log). engine-sync=false
// skips the fdatasync of the engines' logs, as a set would whose raft log
// replaces them: what the second sync costs.
//
// go test -run XXX -bench 'Insert$' -benchtime 2s ./replset/
func BenchmarkInsert(b *testing.B) {
	cmd := cpuBatch(1000)
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "tags"}}
	ctx := context.Background()
	const points = 1000 * 10
	b.Run("engine", func(b *testing.B) {
		db, err := timeseries.Open(timeseries.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.CreateCollection(ctx, "cpu", opts); err != nil {
			b.Fatal(err)
		}
		parallel(b, 0, points, func() error {
			_, err := db.Insert(ctx, "cpu", timeseries.Batch{Measurements: cmd.Measurements}, timeseries.InsertOptions{})
			return err
		})
	})
	for _, v := range []struct {
		size   int
		noSync bool
	}{{1, false}, {3, false}, {1, true}, {3, true}} {
		size := v.size
		b.Run(fmt.Sprintf("replicated/members=%d/engine-sync=%v", size, !v.noSync), func(b *testing.B) {
			var nodes []*Node
			var members []Member
			for i := range size {
				n, err := Open(Options{ID: fmt.Sprint(i), Dir: b.TempDir(), Addr: "127.0.0.1:0",
					Engine: timeseries.Options{NoSync: v.noSync}})
				if err != nil {
					b.Fatal(err)
				}
				defer n.Close()
				nodes = append(nodes, n)
				members = append(members, Member{ID: n.ID(), Addr: n.Addr()})
			}
			if err := nodes[0].Bootstrap(members); err != nil {
				b.Fatal(err)
			}
			var l *Node
			for l == nil {
				for _, n := range nodes {
					if n.Role() == RoleLeader {
						l = n
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := l.CreateCollection(ctx, "cpu", opts); err != nil {
				b.Fatal(err)
			}
			parallel(b, 0, points, func() error {
				_, err := l.Insert(ctx, "cpu", timeseries.Batch{Measurements: cmd.Measurements}, timeseries.InsertOptions{})
				return err
			})
		})
	}
}

// parallel runs fn b.N times from 8 goroutines and reports points/s.
func parallel(b *testing.B, bytes int, points float64, fn func() error) {
	const writers = 8
	b.SetBytes(int64(bytes))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		n := b.N / writers
		if w < b.N%writers {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(points*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkApply applies a run of committed insert entries (5000 cpu-only
// measurements each, meta values as canonical keys, as a leader encodes
// line protocol) through the state machine, as a member catching up from
// the log does (fsm), against the same measurements inserted into an
// engine by 1 or 2 writers, with and without its own log (a single node's
// HTTP handlers: 2 writers, log=true). A member's engine writes no log.
//
// go test -run XXX -bench Apply -benchtime 3x ./replset/
func BenchmarkApply(b *testing.B) {
	const entries, rows = 40, 5000
	const points = entries * rows * 10
	opts := timeseries.CollectionOptions{TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "tags"}}
	ctx := context.Background()
	cmds := make([]*Command, entries)
	logs := make([]*raft.Log, entries)
	for i := range cmds {
		c := cpuBatch(rows)
		c.Op = OpInsertKeyed
		for j := range c.Measurements {
			m := &c.Measurements[j]
			m.Time += int64(i) * rows / 100 * 10e9
			k, err := model.CanonicalMeta(m.Meta)
			if err != nil {
				b.Fatal(err)
			}
			m.Meta = model.MetaKey(k)
		}
		data, err := c.encode(nil)
		if err != nil {
			b.Fatal(err)
		}
		cmds[i] = c
		logs[i] = &raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: data}
	}
	open := func(b *testing.B, external bool) *timeseries.DB {
		db, err := timeseries.Open(timeseries.Options{Dir: b.TempDir(), ExternalLog: external})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if _, err := db.CreateCollection(ctx, "cpu", opts); err != nil {
			b.Fatal(err)
		}
		return db
	}
	for _, v := range []struct {
		writers  int
		external bool
	}{{1, false}, {2, false}, {1, true}, {2, true}} {
		b.Run(fmt.Sprintf("engine/writers=%d/log=%v", v.writers, !v.external), func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				db := open(b, v.external)
				start := time.Now()
				var wg sync.WaitGroup
				for w := range v.writers {
					wg.Go(func() {
						for i := w; i < entries; i += v.writers {
							if _, err := db.Insert(ctx, "cpu", timeseries.Batch{Measurements: cmds[i].Measurements}, timeseries.InsertOptions{}); err != nil {
								b.Error(err)
							}
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			b.ReportMetric(points*float64(b.N)/elapsed.Seconds(), "points/s")
		})
	}
	b.Run("fsm", func(b *testing.B) {
		var elapsed time.Duration
		for range b.N {
			f := openFSM(b)
			if _, err := f.db.CreateCollection(ctx, "cpu", opts); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < entries; i += 64 {
				for _, r := range f.ApplyBatch(logs[i:min(i+64, entries)]) {
					if err := r.(*applyResult).err; err != nil {
						b.Fatal(err)
					}
				}
			}
			elapsed += time.Since(start)
		}
		b.ReportMetric(points*float64(b.N)/elapsed.Seconds(), "points/s")
	})
}
