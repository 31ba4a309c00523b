package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// hostileDiskFull: the data directory's filesystem fills up while writes
// go on; reads must go on answering, and writes must resume once space is
// freed, without a restart.
func hostileDiskFull(ctx context.Context, h *hostileRun) (HostileOutcome, error) {
	const ballastBytes, seriesN, lines, maxBodies = 40 << 20, 20000, 20000, 5000
	ballast := filepath.Join(h.dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, ballastBytes), 0o644); err != nil {
		return HostileOutcome{}, err
	}
	rng := rand.New(rand.NewPCG(3, 8))
	t0 := time.Now().Add(-24 * time.Hour).UnixMilli()
	sent := 0
	// write posts the next body: lines rows across seriesN series, random
	// doubles (some 6 bytes a point on disk, so that the disk fills).
	write := func() (int, string, error) {
		var b strings.Builder
		for j := range lines {
			fmt.Fprintf(&b, "m,sensor=s%04d v=%v %d\n", j%seriesN, rng.Float64(), t0+int64(sent*lines+j))
		}
		st, msg, err := postLines(ctx, h.srv.URL+"/write?db=full&precision=ms", b.String())
		if err == nil && st/100 == 2 {
			sent++
		}
		return st, msg, err
	}
	var refusal string
	for range maxBodies {
		st, msg, err := write()
		if err != nil {
			return HostileOutcome{}, err
		}
		if st == http.StatusInsufficientStorage {
			refusal = msg
			break
		}
		if st/100 != 2 {
			return HostileOutcome{}, fmt.Errorf("write %d: %d %s", sent, st, msg)
		}
	}
	acked := int64(sent) * lines
	full := acked
	o := HostileOutcome{Held: true, Figures: map[string]float64{"ackedRows": float64(acked)}}
	if refusal == "" {
		return HostileOutcome{}, fmt.Errorf("%d bodies written and no 507: the filesystem did not fill", maxBodies)
	}
	h.say("diskfull: %d rows acknowledged, then 507: %.300s", acked, refusal)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }

	start := time.Now()
	n, err := countNDJSON(ctx, h.srv.URL+"/v1/collections/full/find")
	o.Figures["fullFindMillis"] = float64(time.Since(start).Milliseconds())
	h.say("diskfull: find of everything while full: %d rows in %s: %v", n, time.Since(start).Round(time.Millisecond), err)
	switch {
	case err != nil:
		fail("find while full: %v", err)
	case n != acked:
		fail("find while full: %d rows, %d acknowledged", n, acked)
	}
	cl, err := mongoConnect(ctx, "mongodb://"+h.srv.Mongo+"/?directConnection=true")
	if err != nil {
		return HostileOutcome{}, err
	}
	defer cl.Disconnect(context.Background())
	coll := cl.Database("hourglass").Collection("full")
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != acked {
		fail("countDocuments while full: %d, %v; %d acknowledged", n, err, acked)
	}

	// Space is freed: writes must resume without a restart.
	if err := os.Remove(ballast); err != nil {
		return HostileOutcome{}, err
	}
	freed := time.Now()
	var last string
	resumed := false
	for time.Since(freed) < 30*time.Second {
		st, msg, err := write()
		if err != nil {
			return HostileOutcome{}, err
		}
		if st/100 == 2 {
			resumed = true
			break
		}
		last = fmt.Sprintf("%d %.300s", st, msg)
		time.Sleep(200 * time.Millisecond)
	}
	o.Figures["resumeMillis"] = float64(time.Since(freed).Milliseconds())
	if !resumed {
		fail("writes still refused 30 s after %d MiB were freed: %s", ballastBytes>>20, last)
	} else {
		h.say("diskfull: writes resumed %s after the space was freed", time.Since(freed).Round(time.Millisecond))
		// And keep going: as many rows again as the freed space held.
		for i := range 20 {
			if st, msg, err := write(); err != nil || st/100 != 2 {
				fail("write %d after resuming: %d %.300s %v", i, st, msg, err)
				break
			}
		}
	}
	acked = int64(sent) * lines
	o.Figures["ackedRows"] = float64(acked)
	o.Figures["ackedRowsWhenFull"] = float64(full)
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != acked {
		fail("countDocuments after resuming: %d, %v; %d acknowledged", n, err, acked)
	}
	if len(failures) > 0 {
		o.Held, o.Detail = false, strings.Join(failures, "; ")
	} else {
		o.Detail = fmt.Sprintf("507 after %d rows; while full, a find of all of them took %.0f ms; writes resumed %.0f ms after %d MiB were freed, %d rows in the end",
			full, o.Figures["fullFindMillis"], o.Figures["resumeMillis"], ballastBytes>>20, acked)
	}
	return o, nil
}

// postLines posts line protocol; it returns the status and the body.
func postLines(ctx context.Context, url, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(bytes.TrimSpace(b)), nil
}

// countNDJSON runs a find of everything in NDJSON and counts its lines.
func countNDJSON(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return 0, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var n int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			n++
		}
	}
	return n, sc.Err()
}
