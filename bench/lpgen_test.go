package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// peersToolsEnv overrides where the peers harness's Go tools module is; by
// default it is ../shared/peers/tools next to the repository.
const peersToolsEnv = "HOURGLASS_PEERS_TOOLS"

// missingLpgen skips the test, saying what was not compared and why, or
// fails it in CI (CI=true), where the comparison must run.
func missingLpgen(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("generator NOT compared with the peers harness's lpgen in CI: %s", msg)
	}
	t.Skipf("SKIPPED, generator NOT compared with the peers harness's lpgen: %s", msg)
}

// buildLpgen builds the peers harness's lpgen into a temporary directory and
// returns the binary's path. When the go command or the harness's sources
// are missing it skips the test, or fails it in CI.
func buildLpgen(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		missingLpgen(t, "go command not on PATH")
	}
	dir := os.Getenv(peersToolsEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "peers", "tools")
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "lpgen", "main.go")); err != nil {
		missingLpgen(t, "sources not found (set %s to its tools module): %v", peersToolsEnv, err)
	}
	bin := filepath.Join(t.TempDir(), "lpgen")
	cmd := exec.Command(goCmd, "build", "-o", bin, "./cmd/lpgen")
	cmd.Dir = dir
	// The tools module is a module of its own: keep any workspace out.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building lpgen in %s: %v\n%s", dir, err, out)
	}
	return bin
}

// lpgenArgs returns the lpgen flags that describe the defaulted workload w.
func lpgenArgs(w Workload) []string {
	w.EnsureDefaults()
	return []string{
		"-scale", strconv.Itoa(w.Scale),
		"-seed", strconv.FormatInt(w.Seed, 10),
		"-timestamp-start", w.Start.Format(time.RFC3339Nano),
		"-timestamp-end", w.End.Format(time.RFC3339Nano),
		"-log-interval", w.Interval.String(),
		"-values", w.Values.String(),
	}
}

// generate returns the whole workload as line protocol.
func generate(w Workload) []byte {
	g := w.NewGenerator()
	var (
		row Row
		out []byte
	)
	for g.Next(&row) {
		out = g.AppendLine(out, &row)
	}
	return out
}

var lpgenSummary = regexp.MustCompile(`lpgen: (\d+) rows, (\d+) points`)

func TestMatchesLpgen(t *testing.T) {
	bin := buildLpgen(t)
	// Each case is about 2,000 lines, compared whole.
	odd := time.Date(2017, time.March, 4, 5, 6, 7, 0, time.UTC)
	quarter := time.Date(2016, time.June, 30, 23, 59, 59, 250e6, time.FixedZone("", 2*3600))
	cases := []struct {
		name string
		w    Workload
	}{
		{"defaults/int", Workload{End: DefaultStart.Add(200 * time.Second)}},
		{"defaults/float", Workload{End: DefaultStart.Add(200 * time.Second), Values: ValuesFloat}},
		// The span is not a multiple of the interval: 286 ticks, the last
		// one 45 s before End.
		{"scale7/int", Workload{Scale: 7, Seed: 42, Start: odd, End: odd.Add(286*90*time.Second - 45*time.Second), Interval: 90 * time.Second}},
		{"scale7/float", Workload{Scale: 7, Seed: 42, Start: odd, End: odd.Add(286*90*time.Second - 45*time.Second), Interval: 90 * time.Second, Values: ValuesFloat}},
		// One host, so the walks reach the clamps; negative seed, fractional
		// start in another zone, sub-second interval.
		{"scale1/int", Workload{Scale: 1, Seed: -5, Start: quarter, End: quarter.Add(2000 * 1500 * time.Millisecond), Interval: 1500 * time.Millisecond}},
		{"scale1/float", Workload{Scale: 1, Seed: -5, Start: quarter, End: quarter.Add(2000 * 1500 * time.Millisecond), Interval: 1500 * time.Millisecond, Values: ValuesFloat}},
		{"scale1000/float", Workload{Scale: 1000, Seed: 7, End: DefaultStart.Add(20 * time.Second), Values: ValuesFloat}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, lpgenArgs(tc.w)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("lpgen %v: %v\n%s", cmd.Args[1:], err, stderr.Bytes())
			}
			got := generate(tc.w)
			compareLines(t, got, want)

			m := lpgenSummary.FindSubmatch(stderr.Bytes())
			if m == nil {
				t.Fatalf("no row count in lpgen's summary %q", stderr.Bytes())
			}
			if rows, points := string(m[1]), string(m[2]); rows != strconv.Itoa(tc.w.Rows()) || points != strconv.Itoa(tc.w.Points()) {
				t.Errorf("Rows, Points = %d, %d; lpgen wrote %s rows, %s points", tc.w.Rows(), tc.w.Points(), rows, points)
			}
			if tc.w.Rows() < 1000 {
				t.Errorf("case has only %d rows", tc.w.Rows())
			}
		})
	}
}

// compareLines fails t at the first line where got and want differ.
func compareLines(t *testing.T, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.SplitAfter(got, []byte("\n")), bytes.SplitAfter(want, []byte("\n"))
	for i := 0; i < min(len(gl), len(wl)); i++ {
		if !bytes.Equal(gl[i], wl[i]) {
			t.Fatalf("line %d differs from lpgen's:\n got %q\nwant %q", i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%d lines (%d bytes), lpgen wrote %d lines (%d bytes)", len(gl), len(got), len(wl), len(want))
}
