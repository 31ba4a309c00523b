package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

type writerKind uint8

const (
	kindJSON    writerKind = iota // NDJSON into a time series
	kindLP                        // line protocol into a time series
	kindPlain                     // documents into a plain collection
	kindTTL                       // NDJSON into a time series with a TTL: rows already expired and rows just written
	kindArchive                   // as kindTTL, into a time series whose TTL archives: every row stays readable
)

// States of a row (or of an index, or a collection) in the model.
const (
	rowUnsent  uint8 = iota // never sent (an index or collection: absent)
	rowAcked                // insert acknowledged: must be found
	rowMaybe                // sent without an acknowledgement: may be found, until a check settles it
	rowDeleted              // delete acknowledged, or absent at a check: must never be found again
)

// crashWriter is one client writing one series (or, in the plain
// collection, documents with one "w"), one request at a time: inserts of
// rows numbered 0, 1, 2, ... and deletes of its oldest rows.
type crashWriter struct {
	kind       writerKind
	coll, name string
	model      *crashModel
	rng        *rand.Rand

	states []uint8 // by row number
	times  []int64 // kindTTL and kindArchive: each row's time, Unix ms
	delLow int     // rows below it were in a delete sent

	acked, unacked int // this cycle's
}

// crashLive bounds the rows a writer keeps: past it, it deletes its
// oldest, so that a check's finds stay small however many cycles run.
const crashLive = 20000

// rowTime is row seq's time.
func (w *crashWriter) rowTime(seq int) time.Time {
	if w.kind == kindTTL || w.kind == kindArchive {
		return time.UnixMilli(w.times[seq]).UTC()
	}
	return crashEpoch.Add(time.Duration(seq) * time.Second)
}

// run writes until ctx is done or the server stops answering.
func (w *crashWriter) run(ctx context.Context, c *apiClient) {
	for ctx.Err() == nil {
		live := len(w.states) - w.delLow
		del := w.kind != kindTTL && w.kind != kindArchive && live > 0 && (live > crashLive || w.rng.IntN(8) == 0)
		var more bool
		if del {
			more = w.delete(ctx, c)
		} else {
			more = w.insert(ctx, c)
		}
		if !more {
			return
		}
	}
}

// insert sends 1 to 200 new rows; false when the server is gone.
func (w *crashWriter) insert(ctx context.Context, c *apiClient) bool {
	n := 1 + w.rng.IntN(200)
	lo := len(w.states)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var body bytes.Buffer
	for seq := lo; seq < lo+n; seq++ {
		w.states = append(w.states, rowMaybe)
		switch w.kind {
		case kindJSON:
			fmt.Fprintf(&body, `{"t": {"$date": %q}, "sensor": %q, "v": %d}`+"\n", w.rowTime(seq).Format(time.RFC3339Nano), w.name, seq)
		case kindLP:
			fmt.Fprintf(&body, "crash,sensor=%s v=%di %d\n", w.name, seq, w.rowTime(seq).UnixNano())
		case kindPlain:
			if seq == lo {
				body.WriteByte('[')
			} else {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"_id": "%s-%d", "w": %q, "v": %d}`, w.name, seq, w.name, seq)
		case kindTTL, kindArchive:
			t := now // odd rows expired when written, even ones just written
			if seq%2 == 1 {
				t = now.Add(-3 * time.Hour)
			}
			w.times = append(w.times, t.UnixMilli())
			fmt.Fprintf(&body, `{"t": {"$date": %q}, "sensor": %q, "v": %d}`+"\n", w.rowTime(seq).Format(time.RFC3339Nano), w.name, seq)
		}
	}
	path, ctype := "/v1/collections/"+w.coll+"/documents", "application/x-ndjson"
	switch w.kind {
	case kindLP:
		path, ctype = "/write?db="+w.coll, "text/plain; charset=utf-8"
	case kindPlain:
		body.WriteByte(']')
		ctype = "application/json"
	}
	st, reply, err := c.do(ctx, http.MethodPost, path, ctype, body.Bytes())
	switch {
	case err != nil:
		w.unacked += n
		return false
	case st == http.StatusOK || st == http.StatusNoContent:
		for seq := lo; seq < lo+n; seq++ {
			w.states[seq] = rowAcked
		}
		w.acked += n
		return true
	case st == http.StatusTooManyRequests || st >= 500:
		// Not acknowledged: the rows stay in doubt.
		w.unacked += n
		return sleepCtx(ctx, 50*time.Millisecond)
	}
	w.unacked += n
	w.model.fault(fmt.Errorf("%s: insert into %s: HTTP %d: %s", w.name, w.coll, st, reply))
	return false
}

// delete deletes the writer's oldest rows not yet deleted; false when the
// server is gone. It checks the count the server reports: at least the
// acknowledged rows of the range, at most the range.
func (w *crashWriter) delete(ctx context.Context, c *apiClient) bool {
	live := len(w.states) - w.delLow
	k := 1 + w.rng.IntN(max(1, live/2))
	lo, hi := w.delLow, w.delLow+k
	date := func(seq int) any { return map[string]any{"$date": w.rowTime(seq).Format(time.RFC3339Nano)} }
	var filter map[string]any
	// Half of the time-series deletes name the rows by their field v (=
	// seq): matched one by one, logged with their filter.
	byField := w.rng.IntN(2) == 0
	switch {
	case w.kind == kindJSON && byField:
		filter = map[string]any{"sensor": w.name, "v": map[string]any{"$gte": lo, "$lt": hi}}
	case w.kind == kindJSON:
		filter = map[string]any{"sensor": w.name, "t": map[string]any{"$gte": date(lo), "$lt": date(hi)}}
	case w.kind == kindLP && byField:
		filter = map[string]any{"tags.sensor": w.name, "v": map[string]any{"$gte": lo, "$lt": hi}}
	case w.kind == kindLP:
		filter = map[string]any{"tags.sensor": w.name, "time": map[string]any{"$gte": date(lo), "$lt": date(hi)}}
	case w.kind == kindPlain:
		filter = map[string]any{"w": w.name, "v": map[string]any{"$gte": lo, "$lt": hi}}
	}
	must := 0
	for seq := lo; seq < hi; seq++ {
		if w.states[seq] == rowAcked {
			w.states[seq] = rowMaybe
			must++
		}
	}
	w.delLow = hi
	var out struct {
		Deleted int `json:"deleted"`
	}
	err := c.call(ctx, http.MethodPost, "/v1/collections/"+w.coll+"/delete", map[string]any{"filter": filter}, &out)
	var se *statusError
	switch {
	case errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status >= 500):
		return sleepCtx(ctx, 50*time.Millisecond)
	case errors.As(err, &se):
		w.model.fault(fmt.Errorf("%s: delete rows %d..%d: %w", w.name, lo, hi-1, err))
		return false
	case err != nil:
		return false
	}
	for seq := lo; seq < hi; seq++ {
		w.states[seq] = rowDeleted
	}
	w.acked++
	if out.Deleted < must || out.Deleted > k {
		w.model.violate(Violation{Collection: w.coll, What: fmt.Sprintf(
			"%s: the delete of rows %d..%d reported %d deleted; %d of them were acknowledged, %d sent", w.name, lo, hi-1, out.Deleted, must, k)})
	}
	return true
}

// sleepCtx sleeps for d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ddlClient changes the collections' definitions, one request at a time:
// collMod of crash_ttl's TTL, an index created and dropped on crash_plain,
// scratch collections created, written and dropped, compactions and TTL
// passes.
type ddlClient struct {
	model *crashModel
	rng   *rand.Rand

	ttl, ttlPending int64 // crash_ttl's acknowledged TTL; one sent without an acknowledgement, or 0
	index           uint8 // v_1 on crash_plain: rowUnsent (absent), rowAcked (present) or rowMaybe

	scratchSeq  int    // scratch collections created so far
	scratch     string // the current one, "" when none
	scratchOK   uint8  // rowAcked: created, rowMaybe: created without an acknowledgement
	scratchRows uint8  // its 10 rows: rowUnsent, rowAcked or rowMaybe
	gone        []string

	acked int // requests acknowledged this cycle
}

const crashIndex = "v_1"

func (d *ddlClient) run(ctx context.Context, c *apiClient) {
	for sleepCtx(ctx, time.Duration(20+d.rng.IntN(130))*time.Millisecond) {
		var err error
		switch d.rng.IntN(5) {
		case 0:
			if d.ttlPending != 0 {
				continue // in doubt until the next check
			}
			next := crashTTLs[0]
			if d.ttl == next {
				next = crashTTLs[1]
			}
			d.ttlPending = next
			if err = c.call(ctx, http.MethodPatch, "/v1/collections/"+crashTTL, map[string]any{"expireAfterSeconds": next}, nil); err == nil {
				d.ttl, d.ttlPending = next, 0
			}
		case 1:
			switch d.index {
			case rowMaybe:
				continue
			case rowAcked:
				d.index = rowMaybe
				if err = c.call(ctx, http.MethodDelete, "/v1/collections/"+crashPlain+"/indexes/"+crashIndex, nil, nil); err == nil {
					d.index = rowUnsent
				}
			default:
				d.index = rowMaybe
				var out struct {
					Created bool `json:"created"`
				}
				spec := map[string]any{"key": map[string]any{"v": 1}, "name": crashIndex}
				if err = c.call(ctx, http.MethodPost, "/v1/collections/"+crashPlain+"/indexes", spec, &out); err == nil {
					d.index = rowAcked
					if !out.Created {
						d.model.violate(Violation{Collection: crashPlain, What: "index " + crashIndex + " existed before it was created (its drop was acknowledged)"})
					}
				}
			}
		case 2:
			err = d.scratchStep(ctx, c)
		case 3:
			colls := []string{crashJSON, crashLP, crashPlain, crashTTL}
			err = c.call(ctx, http.MethodPost, "/v1/collections/"+colls[d.rng.IntN(len(colls))]+"/compact", nil, nil)
		case 4:
			err = c.call(ctx, http.MethodPost, "/v1/admin/ttl/run", nil, nil)
		}
		var se *statusError
		switch {
		case err == nil:
			d.acked++
		case errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status >= 500):
		case errors.As(err, &se):
			d.model.fault(fmt.Errorf("ddl: %w", err))
			return
		default:
			return // the server is gone
		}
	}
}

// scratchStep takes the scratch collection one step: create, write 10
// rows, drop.
func (d *ddlClient) scratchStep(ctx context.Context, c *apiClient) error {
	switch {
	case d.scratch == "":
		d.scratchSeq++
		d.scratch, d.scratchOK, d.scratchRows = "crash_scratch_"+strconv.Itoa(d.scratchSeq), rowMaybe, rowUnsent
		err := c.call(ctx, http.MethodPut, "/v1/collections/"+d.scratch, map[string]any{"timeseries": map[string]any{"timeField": "t", "metaField": "sensor"}}, nil)
		if err == nil {
			d.scratchOK = rowAcked
		}
		return err
	case d.scratchOK == rowAcked && d.scratchRows == rowUnsent:
		d.scratchRows = rowMaybe
		var body bytes.Buffer
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&body, `{"t": {"$date": %q}, "sensor": "s", "v": %d}`+"\n", crashEpoch.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i)
		}
		st, reply, err := c.do(ctx, http.MethodPost, "/v1/collections/"+d.scratch+"/documents", "application/x-ndjson", body.Bytes())
		if err != nil {
			return err
		}
		if st != http.StatusOK {
			return &statusError{Method: http.MethodPost, Path: d.scratch + "/documents", Status: st, Body: string(reply)}
		}
		d.scratchRows = rowAcked
		return nil
	default:
		// In doubt until acknowledged: dropped or not.
		created := d.scratchOK == rowAcked
		d.scratchOK = rowMaybe
		if d.scratchRows == rowAcked {
			d.scratchRows = rowMaybe
		}
		err := c.call(ctx, http.MethodDelete, "/v1/collections/"+d.scratch, nil, nil)
		var se *statusError
		if errors.As(err, &se) && se.Status == http.StatusNotFound && !created {
			err = nil // its creation never happened
		}
		if err == nil {
			d.dropped()
		}
		return err
	}
}

// dropped records the scratch collection's drop as acknowledged: from
// now on it must not exist.
func (d *ddlClient) dropped() {
	d.gone = append(d.gone, d.scratch)
	if len(d.gone) > 8 {
		d.gone = d.gone[1:]
	}
	d.scratch = ""
}
