package replset

import (
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hourglassdb/hourglass/timeseries"
)

// openFSM returns a state machine over an engine and a log store of its
// own, in tb's temporary directories, as a member's.
func openFSM(tb testing.TB) *fsm {
	tb.Helper()
	db, err := timeseries.Open(timeseries.Options{Dir: tb.TempDir(), ExternalLog: true})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := openLogStore(filepath.Join(tb.TempDir(), "raft"), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close(); db.Close() })
	f, err := newFSM(db, store, tb.TempDir(), tb.TempDir(), slog.New(slog.DiscardHandler), func(error) {})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// entry encodes c as the raft entry at index.
func entry(tb testing.TB, index uint64, c *Command) *raft.Log {
	tb.Helper()
	data, err := c.encode(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// A batch of entries is applied in order while later ones are decoded
// ahead; an entry that halts the member stops the batch there, its later
// entries fail with ErrHalted, and the decoding goroutine ends with it.
func TestApplyBatchDecodesAhead(t *testing.T) {
	f := openFSM(t)
	ins := func(start int) *Command {
		return &Command{Op: OpInsert, Collection: "cpu", Measurements: batch(start, 10)}
	}
	logs := []*raft.Log{
		entry(t, 1, &Command{Op: OpCreateCollection, Collection: "cpu", Options: sensorOpts}),
		{Index: 2, Type: raft.LogNoop},
		entry(t, 3, ins(0)),
		entry(t, 4, ins(10)),
		entry(t, 5, ins(20)),
	}
	for i, r := range f.ApplyBatch(logs) {
		if r, _ := r.(*applyResult); r != nil && r.err != nil { // nil for the no-op entry
			err := r.err
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	if got := count(t, f.db, "cpu"); got != 30 {
		t.Fatalf("%d measurements after the first batch, want 30", got)
	}

	corrupt := &raft.Log{Index: 8, Type: raft.LogCommand, Data: []byte{commandFormat, byte(OpInsert)}}
	logs = []*raft.Log{logs[4], entry(t, 6, ins(30)), entry(t, 7, ins(40)), corrupt,
		entry(t, 9, ins(50)), entry(t, 10, ins(60)), entry(t, 11, ins(70)), entry(t, 12, ins(80))}
	out := f.ApplyBatch(logs)
	for i, r := range out {
		err := r.(*applyResult).err
		if i < 3 && err != nil {
			t.Fatalf("entry %d: %v", logs[i].Index, err)
		}
		if i >= 3 && !errors.Is(err, ErrHalted) {
			t.Fatalf("entry %d: %v, want ErrHalted", logs[i].Index, err)
		}
	}
	if applied, halted := f.state(); applied != 7 || halted == nil {
		t.Fatalf("applied %d, halted %v; want 7 and halted", applied, halted)
	}
	if got := count(t, f.db, "cpu"); got != 50 {
		t.Fatalf("%d measurements, want 50 (entry 5 once, nothing after the corrupt entry)", got)
	}
	// The decoding goroutine has ended (it would be blocked on sending a
	// decoded entry nobody takes).
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "decodeAhead") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decoding goroutine is left:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The leader's state machine applies the command offered with an entry's
// data instead of decoding the data, unless the offer was withdrawn.
func TestApplyOffered(t *testing.T) {
	f := openFSM(t)
	if r := f.ApplyBatch([]*raft.Log{entry(t, 1, &Command{Op: OpCreateCollection, Collection: "cpu", Options: sensorOpts})}); r[0].(*applyResult).err != nil {
		t.Fatal(r[0].(*applyResult).err)
	}
	ins := &Command{Op: OpInsertKeyed, Collection: "cpu", Measurements: batch(0, 10)}
	data, own, err := ins.encodeOwn(nil, true)
	if err != nil || own == nil {
		t.Fatalf("encodeOwn: %v, %v", own, err)
	}
	// An offer that differs from the data shows which one was applied.
	h := f.offer(data, &Command{Op: OpInsertKeyed, Collection: "cpu", Measurements: own.Measurements[:4]})
	if r := f.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: data}}); r[0].(*applyResult).err != nil {
		t.Fatal(r[0].(*applyResult).err)
	}
	f.withdraw(data, h) // taken and done: returns at once
	if got := count(t, f.db, "cpu"); got != 4 {
		t.Fatalf("%d measurements, want the 4 offered", got)
	}
	data2 := append([]byte(nil), data...)
	f.withdraw(data2, f.offer(data2, &Command{Op: OpInsertKeyed, Collection: "cpu", Measurements: own.Measurements[:4]}))
	if r := f.ApplyBatch([]*raft.Log{{Index: 3, Type: raft.LogCommand, Data: data2}}); r[0].(*applyResult).err != nil {
		t.Fatal(r[0].(*applyResult).err)
	}
	if got := count(t, f.db, "cpu"); got != 14 {
		t.Fatalf("%d measurements, want 14: the 10 of the data after a withdrawn offer", got)
	}
}
