package replset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble"

	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/timeseries"
)

// Retryable writes. A MongoDB driver retries a write once when the primary
// it sent it to failed over, with the same session id and transaction
// number: the first attempt may have been committed before the failover.
// Each statement of such a write carries a session key in the log
// (Command.Session: session id, transaction number, op and the statement's
// rank among the command's calls of that op). The state machine keeps the
// keys it applied with their results (sessionTable, built from the log
// alone, so the same on every member); a command whose key it holds is
// not applied again and answers the result the first one had.

// maxSessionKeys bounds the keys kept; the oldest go first. A driver
// retries within seconds of the first attempt.
const maxSessionKeys = 100_000

type sessionCtxKey struct{}

// sessionCall numbers the statements of one retryable command.
type sessionCall struct {
	id  string
	txn int64
	mu  sync.Mutex
	n   map[Op]int
}

// WithSession returns a context under which the writes of one command of
// a MongoDB session (its lsid, as text, and txnNumber) are retryable: a
// retry of the command, with the same id and number, makes the same calls
// in the same order and gets the first attempt's results back instead of
// writing again.
func WithSession(ctx context.Context, id string, txn int64) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, &sessionCall{id: id, txn: txn, n: map[Op]int{}})
}

// retryable reports whether c is a write that applying twice would change
// twice (the others are idempotent, or refused the second time).
func retryable(op Op) bool {
	switch op {
	case OpInsert, OpInsertKeyed, OpInsertDocuments, OpDelete, OpDeleteDocuments, OpDeleteOne, OpUpdateDocuments, OpReplaceDocument:
		return true
	}
	return false
}

// sessionKey gives c its key when ctx carries a session.
func sessionKey(ctx context.Context, c *Command) {
	call, _ := ctx.Value(sessionCtxKey{}).(*sessionCall)
	if call == nil || !retryable(c.Op) {
		return
	}
	op := c.Op
	if op == OpInsertKeyed {
		op = OpInsert // one rank for both encodings of an insert
	}
	call.mu.Lock()
	rank := call.n[op]
	call.n[op]++
	call.mu.Unlock()
	c.Session = fmt.Sprintf("%s:%d:%d:%d", call.id, call.txn, op, rank)
}

// storedResult is a Result as the session table keeps it.
type storedResult struct {
	Index    uint64        `json:"index"` // the entry that applied it
	Inserted int           `json:"inserted,omitempty"`
	Errors   []storedError `json:"errors,omitempty"`
	Deleted  int64         `json:"deleted,omitempty"`
	Matched  int64         `json:"matched,omitempty"`
	Modified int64         `json:"modified,omitempty"`
	Err      *storedError  `json:"err,omitempty"`
}

type storedError struct {
	Index int    `json:"i,omitempty"`
	Code  int    `json:"code"`
	Msg   string `json:"msg"`
}

func storeError(err error) storedError {
	return storedError{Code: int(mongoerr.CodeOf(err)), Msg: err.Error()}
}

func (e storedError) error() error {
	return mongoerr.New(mongoerr.Code(e.Code), "%s", e.Msg)
}

func toStored(index uint64, r *applyResult) storedResult {
	s := storedResult{Index: index, Inserted: r.res.Insert.Inserted, Deleted: r.res.Deleted,
		Matched: r.res.Update.Matched, Modified: r.res.Update.Modified}
	for _, we := range r.res.Insert.Errors {
		e := storeError(we.Err)
		e.Index = we.Index
		s.Errors = append(s.Errors, e)
	}
	if r.err != nil {
		e := storeError(r.err)
		s.Err = &e
	}
	return s
}

func (s storedResult) applyResult() *applyResult {
	r := &applyResult{}
	r.res.Insert.Inserted, r.res.Deleted = s.Inserted, s.Deleted
	r.res.Update.Matched, r.res.Update.Modified = s.Matched, s.Modified
	for _, e := range s.Errors {
		r.res.Insert.Errors = append(r.res.Insert.Errors, timeseries.WriteError{Index: e.Index, Err: e.error()})
	}
	if s.Err != nil {
		r.err = s.Err.error()
	}
	return r
}

// sessionTable is the keys applied, oldest first in order. The state
// machine's goroutine alone changes it; Node readers do not read it.
type sessionTable struct {
	m     map[string]storedResult
	order []string
	// added and removed are the changes not yet written to the store.
	added   []string
	removed []string
}

// sessionPrefix is the stable-store key prefix of the table's entries.
const sessionPrefix = "sess/"

func loadSessions(s *logStore) (*sessionTable, error) {
	t := &sessionTable{m: map[string]storedResult{}}
	type kv struct {
		key string
		res storedResult
	}
	var all []kv
	lo, hi := sessionRange()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		var r storedResult
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			it.Close()
			return nil, fmt.Errorf("%w: session entry: %v", ErrCorrupt, err)
		}
		all = append(all, kv{string(it.Key()[len(lo):]), r})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("replset: read the session table: %w", err)
	}
	// Oldest first, by the entry that applied them.
	sortKV := func(a, b kv) int {
		switch {
		case a.res.Index < b.res.Index:
			return -1
		case a.res.Index > b.res.Index:
			return 1
		}
		return strings.Compare(a.key, b.key)
	}
	slices.SortFunc(all, sortKV)
	for _, e := range all {
		t.m[e.key] = e.res
		t.order = append(t.order, e.key)
	}
	return t, nil
}

// get returns the result recorded for key.
func (t *sessionTable) get(key string) (storedResult, bool) {
	r, ok := t.m[key]
	return r, ok
}

// put records key's result, dropping the oldest keys beyond the bound.
func (t *sessionTable) put(key string, r storedResult) {
	if _, ok := t.m[key]; ok {
		return
	}
	t.m[key] = r
	t.order = append(t.order, key)
	t.added = append(t.added, key)
	for len(t.order) > maxSessionKeys {
		old := t.order[0]
		t.order = t.order[1:]
		delete(t.m, old)
		t.removed = append(t.removed, old)
	}
}

// flush adds the changes since the last flush to b.
func (t *sessionTable) flush(b *pebble.Batch) error {
	for _, k := range t.removed {
		if err := b.Delete(stableKey([]byte(sessionPrefix+k)), nil); err != nil {
			return err
		}
	}
	for _, k := range t.added {
		r, ok := t.m[k]
		if !ok {
			continue // added and dropped in one batch
		}
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := b.Set(stableKey([]byte(sessionPrefix+k)), v, nil); err != nil {
			return err
		}
	}
	t.added, t.removed = t.added[:0], t.removed[:0]
	return nil
}

// entries returns the table, oldest first, for a snapshot.
func (t *sessionTable) entries() []sessionEntry {
	out := make([]sessionEntry, 0, len(t.order))
	for _, k := range t.order {
		out = append(out, sessionEntry{Key: k, Result: t.m[k]})
	}
	return out
}

// sessionEntry is one key of the table in a snapshot's state.
type sessionEntry struct {
	Key    string       `json:"key"`
	Result storedResult `json:"result"`
}

// replace sets the table to a snapshot's and writes it to the store,
// removing every key the store held.
func (t *sessionTable) replace(s *logStore, list []sessionEntry) error {
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := sessionRange()
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	t.m, t.order, t.added, t.removed = map[string]storedResult{}, nil, nil, nil
	for _, e := range list {
		t.m[e.Key] = e.Result
		t.order = append(t.order, e.Key)
		t.added = append(t.added, e.Key)
	}
	if err := t.flush(b); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// sessionRange is the store's range of session keys.
func sessionRange() (lo, hi []byte) {
	lo = stableKey([]byte(sessionPrefix))
	hi = append([]byte(nil), lo...)
	hi[len(hi)-1]++
	return lo, hi
}
