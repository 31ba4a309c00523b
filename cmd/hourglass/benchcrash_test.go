package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/bench"
)

// TestBenchCrash runs a short crash loop on the binary built from this
// checkout: three kill -9 cycles, the check after each, a clean stop and
// the check after it.
func TestBenchCrash(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "crash", "--binary", bin, "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--cycles", "3", "--duration", "1500ms", "--seed", "7"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"seed 7", "cycle 3/3", "after the clean stop"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "crash loop clean: seed 7, 3 cycles") {
		t.Errorf("summary: %s", stdout.String())
	}
}

// TestCrashCheckFindsPlantedLoss deletes the plain collection's documents
// behind the clients' back after the first kill: the check must report
// the acknowledged documents missing.
func TestCrashCheckFindsPlantedLoss(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	planted := false
	res, err := bench.RunCrash(context.Background(), bench.CrashConfig{Binary: bin, Dir: filepath.Join(t.TempDir(), "data"),
		Seed: 3, Cycles: 2, Duration: time.Second,
		BeforeCheck: func(ctx context.Context, cycle int, url string) error {
			if cycle != 2 {
				return nil
			}
			planted = true
			resp, err := http.Post(url+"/v1/collections/crash_plain/delete", "application/json", strings.NewReader(`{"filter": {}}`))
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		}})
	if !planted {
		t.Fatalf("the loop ended before the second restart: %v", err)
	}
	if !errors.Is(err, bench.ErrViolation) {
		t.Fatalf("want a violation, got %v", err)
	}
	found := false
	for _, v := range res.Violations {
		if v.Cycle == 2 && v.Collection == "crash_plain" && strings.Contains(v.What, "acknowledged rows missing") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no missing acknowledged documents in crash_plain reported: %v", res.Violations)
	}
	if !strings.Contains(err.Error(), "seed 3, cycle 2") {
		t.Errorf("the error does not name the seed and cycle: %v", err)
	}
}

// TestBenchSoak runs a short soak on the binary built from this checkout
// and reads its JSON report.
func TestBenchSoak(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "soak", "--binary", bin, "--duration", "8s", "--every", "1s", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var res bench.SoakResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(res.Samples) < 8 || res.Requests == 0 || res.Rows == 0 || !res.Flat || len(res.Figures) != 3 {
		t.Fatalf("report: %d samples, %d requests, %d rows, flat %v, %+v", len(res.Samples), res.Requests, res.Rows, res.Flat, res.Figures)
	}
	for _, s := range res.Samples {
		if s.RSSMiB <= 0 || s.FDs <= 0 || s.Goroutines <= 0 {
			t.Fatalf("empty sample: %+v", s)
		}
	}
}

// TestCrashCheckFindsRollupLoss deletes measurements of crash_json's
// rollup behind the loop's back: the check must report the rollup no
// longer matching the source's aggregate.
func TestCrashCheckFindsRollupLoss(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.RunCrash(context.Background(), bench.CrashConfig{Binary: bin, Dir: filepath.Join(t.TempDir(), "data"),
		Seed: 5, Cycles: 1, Duration: time.Second,
		BeforeCheck: func(ctx context.Context, cycle int, url string) error {
			resp, err := http.Post(url+"/v1/collections/crash_json_10s/delete", "application/json", strings.NewReader(`{"filter": {"sensor": "j0"}}`))
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		}})
	if !errors.Is(err, bench.ErrViolation) {
		t.Fatalf("want a violation, got %v", err)
	}
	for _, v := range res.Violations {
		if v.Collection == "crash_json_10s" && strings.Contains(v.What, "lacks") {
			return
		}
	}
	t.Fatalf("no rollup loss reported: %v", res.Violations)
}
