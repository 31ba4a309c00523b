package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// violate records a violation seen during a load; the next check reports
// it.
func (m *crashModel) violate(v Violation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, v)
}

// crashRow is a row of a find on the crash loop's collections, as far as
// the check reads it.
type crashRow struct {
	ID     json.RawMessage `json:"_id"`
	W      string          `json:"w"`
	Sensor string          `json:"sensor"`
	Tags   struct {
		Sensor string `json:"sensor"`
	} `json:"tags"`
	T    extDate     `json:"t"`
	Time extDate     `json:"time"`
	V    json.Number `json:"v"`
}

type extDate struct {
	Date string `json:"$date"`
}

// ttlMargin is the slack of the TTL checks for the time between the
// client's clock readings and the server's.
const ttlMargin = 5 * time.Second

// check compares what the server returns with what the clients were
// told, settles the rows and definitions in doubt to what it found, and
// returns the acknowledged rows it verified and the violations.
func (m *crashModel) check(ctx context.Context, c *apiClient, cycle int) (int, []Violation, error) {
	var vs []Violation
	m.mu.Lock()
	for _, v := range m.pending {
		v.Cycle = cycle - 1
		vs = append(vs, v)
	}
	m.pending = nil
	m.mu.Unlock()
	bad := func(coll, format string, args ...any) {
		vs = append(vs, Violation{Cycle: cycle, Collection: coll, What: fmt.Sprintf(format, args...)})
	}

	// crash_ttl's TTL: the acknowledged one, or the one in doubt.
	var desc struct {
		TTL struct {
			ExpireAfterSeconds *int64 `json:"expireAfterSeconds"`
		} `json:"ttl"`
	}
	if err := c.call(ctx, http.MethodGet, "/v1/collections/"+crashTTL, nil, &desc); err != nil {
		return 0, nil, err
	}
	d := m.ddl
	ttl := int64(-1)
	if e := desc.TTL.ExpireAfterSeconds; e != nil {
		ttl = *e
	}
	if ttl != d.ttl && (d.ttlPending == 0 || ttl != d.ttlPending) {
		bad(crashTTL, "expireAfterSeconds is %d; acknowledged: %d, in doubt: %d", ttl, d.ttl, d.ttlPending)
		ttl = d.ttl
	}
	d.ttl, d.ttlPending = ttl, 0
	// A pass now deletes every expired row: afterwards the stored count of
	// crash_ttl equals what a find returns, as long as no row expires
	// during the check.
	passStart := time.Now()
	if err := c.call(ctx, http.MethodPost, "/v1/admin/ttl/run", nil, nil); err != nil {
		return 0, nil, err
	}

	checked := 0
	for _, coll := range []string{crashJSON, crashLP, crashPlain, crashTTL, crashArchive} {
		var info struct {
			Count   int64 `json:"count"`
			Archive struct {
				Measurements int64 `json:"measurements"`
			} `json:"archive"`
		}
		if err := c.call(ctx, http.MethodGet, "/v1/collections/"+coll, nil, &info); err != nil {
			return 0, nil, err
		}
		seen := map[*crashWriter]map[int]bool{}
		for _, w := range m.writers {
			if w.coll == coll {
				seen[w] = map[int]bool{}
			}
		}
		found, unknown, dups, resurrected, expired := 0, 0, 0, 0, 0
		var examples []string
		example := func(format string, args ...any) {
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf(format, args...))
			}
		}
		var findStart time.Time
		body := map[string]any{}
		if coll == crashArchive {
			// Live and archived rows: every row once, expired or not.
			body["archive"] = true
		}
		checkRow := func(line []byte) error {
			found++
			var r crashRow
			if err := json.Unmarshal(line, &r); err != nil {
				return fmt.Errorf("find on %s: %w: %s", coll, err, line)
			}
			w, seq, ok := m.identify(coll, &r)
			if !ok {
				unknown++
				example("a row no client wrote: %s", line)
				return nil
			}
			if seen[w][seq] {
				dups++
				example("%s row %d found twice", w.name, seq)
				return nil
			}
			seen[w][seq] = true
			switch w.states[seq] {
			case rowUnsent:
				unknown++
				example("%s row %d was never sent: %s", w.name, seq, line)
			case rowDeleted:
				resurrected++
				example("%s row %d was deleted (acknowledged, or absent at an earlier check): %s", w.name, seq, line)
			}
			if w.kind == kindTTL && w.rowTime(seq).Before(findStart.Add(-time.Duration(ttl)*time.Second-ttlMargin)) {
				expired++
				example("%s row %d at %s is past the TTL (%d s) at %s", w.name, seq, w.rowTime(seq).Format(time.RFC3339), ttl, findStart.Format(time.RFC3339))
			}
			return nil
		}
		var err error
		for try := 1; ; try++ {
			found, unknown, dups, resurrected, expired, examples = 0, 0, 0, 0, 0, nil
			for _, s := range seen {
				clear(s)
			}
			findStart = time.Now()
			err = c.stream(ctx, "/v1/collections/"+coll+"/find", body, checkRow)
			// A find that an archive pass cut (it moved rows the read
			// was in) is read again from the start.
			if !readCut(err) || try == maxCheckReads {
				break
			}
		}
		if err != nil {
			return 0, nil, err
		}
		findEnd := time.Now()
		lost, band := 0, 0
		for w, s := range seen {
			for seq, st := range w.states {
				if s[seq] {
					if st == rowAcked {
						checked++
					}
					w.states[seq] = rowAcked
					continue
				}
				if w.kind == kindTTL {
					t := w.rowTime(seq)
					if t.Before(findEnd.Add(-time.Duration(ttl)*time.Second + ttlMargin)) {
						// Expired, or about to during the check: it may be gone.
						if !t.Before(passStart.Add(-time.Duration(ttl)*time.Second - ttlMargin)) {
							band++
						}
						w.states[seq] = rowDeleted
						continue
					}
				}
				switch st {
				case rowAcked:
					lost++
					example("%s row %d at %s, acknowledged, is missing", w.name, seq, w.rowTime(seq).Format(time.RFC3339))
				case rowMaybe:
					w.states[seq] = rowDeleted
				}
			}
		}
		var problems []string
		for _, p := range []struct {
			n    int
			what string
		}{{lost, "acknowledged rows missing"}, {resurrected, "deleted rows returned"}, {unknown, "rows no client wrote"},
			{dups, "rows returned twice"}, {expired, "expired rows returned"}} {
			if p.n > 0 {
				problems = append(problems, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		countOK := info.Count == int64(found)
		if coll == crashArchive {
			// A pass during the check moves rows from one count to the
			// other: their sum holds.
			countOK = info.Count+info.Archive.Measurements == int64(found)
		}
		if coll == crashTTL && band > 0 {
			// Rows expiring during the check may be counted and hidden.
			countOK = info.Count >= int64(found)
		}
		if !countOK {
			problems = append(problems, fmt.Sprintf("describe counts %d, a full find returns %d", info.Count, found))
		}
		if len(problems) > 0 {
			what := strings.Join(problems, ", ")
			if len(examples) > 0 {
				what += " (e.g. " + strings.Join(examples, "; ") + ")"
			}
			bad(coll, "%s", what)
		}
	}

	// The index on crash_plain.
	var idx []struct {
		Name string `json:"name"`
	}
	if err := c.call(ctx, http.MethodGet, "/v1/collections/"+crashPlain+"/indexes", nil, &idx); err != nil {
		return 0, nil, err
	}
	has := false
	for _, i := range idx {
		has = has || i.Name == crashIndex
	}
	switch {
	case d.index == rowAcked && !has:
		bad(crashPlain, "index %s, acknowledged as created, is missing", crashIndex)
	case d.index == rowUnsent && has:
		bad(crashPlain, "index %s, acknowledged as dropped, is listed", crashIndex)
	}
	d.index = rowUnsent
	if has {
		d.index = rowAcked
	}

	// Scratch collections: the current one, and those dropped.
	for _, name := range d.gone {
		err := c.call(ctx, http.MethodGet, "/v1/collections/"+name, nil, nil)
		var se *statusError
		if !errors.As(err, &se) || se.Status != http.StatusNotFound {
			bad(name, "dropped (acknowledged), yet describe answers %v", err)
		}
	}
	if d.scratch != "" {
		var info struct {
			Count int64 `json:"count"`
		}
		err := c.call(ctx, http.MethodGet, "/v1/collections/"+d.scratch, nil, &info)
		var se *statusError
		switch {
		case errors.As(err, &se) && se.Status == http.StatusNotFound:
			if d.scratchOK == rowAcked {
				bad(d.scratch, "created (acknowledged), yet missing")
			}
			d.dropped()
		case err != nil:
			return 0, nil, err
		default:
			switch {
			case d.scratchRows == rowAcked && info.Count != 10, d.scratchRows == rowUnsent && info.Count != 0,
				d.scratchRows == rowMaybe && info.Count != 0 && info.Count != 10:
				bad(d.scratch, "counts %d rows; its one insert of 10 is %s", info.Count, map[uint8]string{
					rowAcked: "acknowledged", rowUnsent: "not sent", rowMaybe: "in doubt"}[d.scratchRows])
			}
			d.scratchOK, d.scratchRows = rowAcked, rowUnsent
			if info.Count == 10 {
				d.scratchRows = rowAcked
			}
		}
	}
	if what, err := m.checkRollup(ctx, c); err != nil {
		return 0, nil, err
	} else if what != "" {
		bad(crashRollup, "%s", what)
	}
	return checked, vs, nil
}

// checkRollup waits for crash_json's rollup to catch up and compares it
// with crash_json's aggregate over the same windows: after any kill, no
// window may be lost or counted twice. It returns what differs.
func (m *crashModel) checkRollup(ctx context.Context, c *apiClient) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var list []struct {
			Name    string `json:"name"`
			Pending int    `json:"pendingSeries"`
		}
		if err := c.call(ctx, http.MethodGet, "/v1/collections/"+crashJSON+"/rollups", nil, &list); err != nil {
			return "", err
		}
		if len(list) != 1 || list[0].Name != crashRollup {
			return fmt.Sprintf("the rollups of %s are %+v", crashJSON, list), nil
		}
		if list[0].Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not caught up a minute after the restart: %d sensors pending", list[0].Pending), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	lines := func(path string, body any) (map[string]bool, error) {
		out := map[string]bool{}
		err := c.stream(ctx, path, body, func(line []byte) error {
			var row map[string]any
			if err := json.Unmarshal(line, &row); err != nil {
				return err
			}
			if d, ok := row["t"].(map[string]any); ok {
				row["t"] = d["$date"] // find's Extended JSON date, the aggregate's flat one
			}
			delete(row, "_id")
			b, err := json.Marshal(row) // keys sorted
			out[string(b)] = true
			return err
		})
		return out, err
	}
	want, err := lines("/v1/collections/"+crashJSON+"/aggregate", map[string]any{"window": "10s", "fields": []string{"v"}, "funcs": crashRollupFuncs})
	if err != nil {
		return "", err
	}
	got, err := lines("/v1/collections/"+crashRollup+"/find", map[string]any{})
	if err != nil {
		return "", err
	}
	for l := range want {
		if !got[l] {
			return fmt.Sprintf("lacks %s (the source's aggregate)", l), nil
		}
	}
	for l := range got {
		if !want[l] {
			return fmt.Sprintf("holds %s, which the source's aggregate does not", l), nil
		}
	}
	return "", nil
}

// identify finds the writer and row number of a found row, checking that
// its series, time and value (or _id) are those the writer sent.
func (m *crashModel) identify(coll string, r *crashRow) (*crashWriter, int, bool) {
	name, date := r.Sensor, r.T.Date
	switch coll {
	case crashLP:
		name, date = r.Tags.Sensor, r.Time.Date
	case crashPlain:
		name = r.W
	}
	w := m.byName[name]
	if w == nil || w.coll != coll {
		return nil, 0, false
	}
	seq, err := strconv.Atoi(string(r.V))
	if err != nil || seq < 0 || seq >= len(w.states) {
		return nil, 0, false
	}
	if coll == crashPlain {
		var id string
		return w, seq, json.Unmarshal(r.ID, &id) == nil && id == name+"-"+strconv.Itoa(seq)
	}
	t, err := time.Parse(time.RFC3339Nano, date)
	return w, seq, err == nil && t.Equal(w.rowTime(seq))
}

// maxCheckReads bounds the reads of one collection in a check that
// archive passes keep cutting.
const maxCheckReads = 5

// readCut reports whether err is a read that an archive pass cut
// (QueryPlanKilled, 175, HTTP 503): the read may be made again.
func readCut(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.Status == http.StatusServiceUnavailable && strings.Contains(se.Body, `"code":175`)
}
