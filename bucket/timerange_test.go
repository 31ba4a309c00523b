package bucket

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
)

// indexTimes returns n sorted times of a kind of series, from seed:
//   - regular: every 10 s;
//   - jitter-ns: every 10 s, each up to 5 ms late, in nanoseconds (a collector's clock);
//   - jitter-ms: the same in whole milliseconds, up to 50 ms late (a scaled column);
//   - exp-ns: exponential gaps of 10 s on average, in nanoseconds (events);
//   - gaps: every 10 s, with a gap of up to 10 minutes one time in 50 (a flaky sender).
//
// The old-format buckets of testdata/timeindex hold these times: never change them.
func indexTimes(kind string, n int, seed int64) []int64 {
	rng := rand.New(rand.NewSource(seed))
	ts := make([]int64, n)
	t := int64(1.7e18)
	for i := range ts {
		switch kind {
		case "regular":
			t += 10e9
		case "jitter-ns":
			t = 1.7e18 + int64(i)*10e9 + rng.Int63n(5e6)
		case "jitter-ms":
			t = 1.7e18 + int64(i)*10e9 + rng.Int63n(50)*1e6
		case "exp-ns":
			t += int64(rng.ExpFloat64() * 10e9)
		case "gaps":
			t += 10e9
			if rng.Intn(50) == 0 {
				t += rng.Int63n(600e9) / 1e9 * 1e9
			}
		default:
			panic("unknown kind " + kind)
		}
		ts[i] = t
	}
	return ts
}

var indexKinds = []string{"regular", "jitter-ns", "jitter-ms", "exp-ns", "gaps"}

// rangeSet is the buckets of one benchmark case, each with the windows
// asked of it.
type rangeSet struct {
	name    string
	buckets [][]byte
	names   []string // the name table, for buckets of VersionRefs
	points  int      // points of the buckets: rows times fields, at least rows
}

// rangeSets returns the benchmark cases: the TSBS host buckets (360 regular
// rows, ten fields), the sorted format fixtures of ../testdata/v7, and
// time-only buckets of each kind of series of 64 to 4096 rows.
func rangeSets(tb testing.TB, blockRows int) []rangeSet {
	enc := Encoder{blockRows: blockRows}
	var sets []rangeSet
	tsbs := rangeSet{name: "tsbs-360", names: tsbsFields}
	for _, cols := range tsbsBuckets(tsbsInt, 4) {
		buf, err := enc.EncodeRefs(nil, &cols, tsbsRefs)
		if err != nil {
			tb.Fatal(err)
		}
		tsbs.buckets = append(tsbs.buckets, buf)
		tsbs.points += len(cols.Times) * len(cols.Fields)
	}
	sets = append(sets, tsbs)
	sets = append(sets, fixtureRangeSet(tb))
	for _, kind := range indexKinds {
		for _, n := range []int{64, 256, 1024, 4096} {
			s := rangeSet{name: kind + "-" + itoa(n)}
			for seed := int64(0); seed < 8; seed++ {
				cols := Columns{Times: indexTimes(kind, n, seed)}
				buf, err := enc.Encode(nil, &cols)
				if err != nil {
					tb.Fatal(err)
				}
				s.buckets = append(s.buckets, buf)
				s.points += n
			}
			sets = append(sets, s)
		}
	}
	return sets
}

// fixtureRangeSet returns the format fixtures of ../testdata/v7 whose times
// are sorted, encoded again by this encoder.
func fixtureRangeSet(tb testing.TB) rangeSet {
	dir := filepath.Join("..", "testdata", "v7", "buckets")
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var exp []struct {
		File  string   `json:"file"`
		Names []string `json:"names"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		tb.Fatal(err)
	}
	set := rangeSet{name: "fixtures"}
	var enc Encoder
	var r Reader
	for _, e := range exp {
		data, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			tb.Fatal(err)
		}
		if err := r.ResetNames(data, e.Names); err != nil {
			tb.Fatal(err)
		}
		cols, err := decodeAllColumns(&r)
		if err != nil {
			tb.Fatal(err)
		}
		if !slices.IsSorted(cols.Times) {
			continue
		}
		out, err := enc.Encode(nil, &cols)
		if err != nil {
			tb.Fatal(err)
		}
		set.buckets = append(set.buckets, out)
		set.points += len(cols.Times) * max(1, len(cols.Fields))
	}
	return set
}

func decodeAllColumns(r *Reader) (Columns, error) {
	var cols Columns
	var err error
	if cols.Times, err = r.Times(nil); err != nil {
		return cols, err
	}
	for i := 0; i < r.NumFields(); i++ {
		var c Column
		if err := r.Column(i, &c); err != nil {
			return cols, err
		}
		cols.Fields = append(cols.Fields, c)
	}
	return cols, nil
}

// rangeWindows returns, per bucket, windows [lo, hi] inside its time span
// of about a tenth of it at random places, as a query's edge buckets are
// cut.
func rangeWindows(tb testing.TB, set *rangeSet, rng *rand.Rand) [][2]int64 {
	var r Reader
	var out [][2]int64
	for _, buf := range set.buckets {
		if err := r.ResetNames(buf, set.names); err != nil {
			tb.Fatal(err)
		}
		span := r.MaxTime() - r.MinTime()
		for j := 0; j < 16; j++ {
			lo := r.MinTime() + rng.Int63n(span+1)
			out = append(out, [2]int64{lo, lo + span/10})
		}
	}
	return out
}

// rangeByDecoding is what a reader does without an index: decode every
// time, then binary search.
func rangeByDecoding(r *Reader, times []int64, lo, hi int64) (first, last int, _ []int64, err error) {
	if times, err = r.Times(times); err != nil {
		return 0, 0, times, err
	}
	first = sort.Search(len(times), func(i int) bool { return times[i] >= lo })
	last = sort.Search(len(times), func(i int) bool { return times[i] > hi })
	return first, max(first, last), times, nil
}

// BenchmarkRowRange finds and counts the rows of windows of a tenth of a
// bucket's span. "decode" decodes every time and binary searches, in
// buckets whose time columns are in one piece, as before blocks (mode
// timeBlocks); "index" calls RowRange and "decode-now" decodes every time,
// in buckets as the encoder writes them now. B/point is of the whole
// buckets.
func BenchmarkRowRange(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	before := rangeSets(b, -1)
	for s, set := range rangeSets(b, 0) {
		windows := rangeWindows(b, &set, rng)
		per := len(windows) / len(set.buckets)
		for _, m := range []struct {
			name string
			set  *rangeSet
		}{{"decode", &before[s]}, {"index", &set}, {"decode-now", &set}} {
			readers := make([]Reader, len(m.set.buckets))
			size := 0
			for i, buf := range m.set.buckets {
				if err := readers[i].ResetNames(buf, m.set.names); err != nil {
					b.Fatal(err)
				}
				size += len(buf)
			}
			b.Run(set.name+"/"+m.name, func(b *testing.B) {
				var times []int64
				count := 0
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					w := windows[i%len(windows)]
					r := &readers[i%len(windows)/per]
					var first, last int
					var err error
					if m.name == "index" {
						first, last, err = r.RowRange(w[0], w[1])
					} else {
						first, last, times, err = rangeByDecoding(r, times, w[0], w[1])
					}
					if err != nil {
						b.Fatal(err)
					}
					count += last - first
				}
				b.ReportMetric(float64(size)/float64(m.set.points), "B/point")
			})
		}
	}
}

// searchRange is RowRange by binary search of sorted times.
func searchRange(times []int64, lo, hi int64) (first, last int) {
	first = sort.Search(len(times), func(i int) bool { return times[i] >= lo })
	last = sort.Search(len(times), func(i int) bool { return times[i] > hi })
	return first, max(first, last)
}

// timeMode returns the mode of buf's time column, past a scale, and
// whether it is scaled; buf's names are inline or in tsbsFields.
func timeMode(t testing.TB, buf []byte) (mode byte, scaled bool) {
	t.Helper()
	var r Reader
	if err := r.ResetNames(buf, tsbsFields); err != nil {
		t.Fatal(err)
	}
	src, _, scale, err := r.timeColumn()
	if err != nil {
		t.Fatal(err)
	}
	return src[0], scale != 1
}

// checkRanges compares RowRange and TimesRange of buf, a bucket of times,
// with searching and slicing times, on windows around each of its times
// and random ones.
func checkRanges(t *testing.T, buf []byte, times []int64, rng *rand.Rand) {
	t.Helper()
	var r Reader
	if err := r.Reset(buf); err != nil {
		t.Fatal(err)
	}
	sorted := slices.IsSorted(times)
	lo, hi := slices.Min(times), slices.Max(times)
	var probes []int64
	for _, x := range []int64{lo, hi} {
		probes = append(probes, x-1, x, x+1)
	}
	for range 8 {
		probes = append(probes, times[rng.Intn(len(times))]+rng.Int63n(3)-1)
		span := uint64(hi-lo) + 1 // 0: every int64
		u := rng.Uint64()
		if span != 0 {
			u %= span
		}
		probes = append(probes, lo+int64(u))
	}
	probes = append(probes, math.MinInt64, math.MaxInt64)
	for _, a := range probes {
		for _, b := range probes {
			first, last, err := r.RowRange(a, b)
			if !sorted {
				if err == nil && !(first == last && (first == 0 || first == len(times)) || first == 0 && last == len(times)) {
					t.Fatalf("RowRange(%d, %d) of unsorted times: [%d, %d)", a, b, first, last)
				}
				if err != nil && !errors.Is(err, ErrUnsorted) {
					t.Fatalf("RowRange(%d, %d) of unsorted times: %v", a, b, err)
				}
				continue
			}
			wf, wl := searchRange(times, a, b)
			if err != nil || first != wf || last != wl {
				t.Fatalf("RowRange(%d, %d) = [%d, %d) %v, want [%d, %d) (%d rows)", a, b, first, last, err, wf, wl, len(times))
			}
		}
	}
	var got []int64
	for range 8 {
		first := rng.Intn(len(times) + 1)
		last := first + rng.Intn(len(times)-first+1)
		var err error
		if got, err = r.TimesRange(first, last, got); err != nil {
			t.Fatalf("TimesRange(%d, %d): %v", first, last, err)
		}
		if !slices.Equal(got, times[first:last]) {
			t.Fatalf("TimesRange(%d, %d) = %v, want %v", first, last, got, times[first:last])
		}
	}
	for _, bad := range [][2]int{{-1, 0}, {1, 0}, {0, len(times) + 1}} {
		if _, err := r.TimesRange(bad[0], bad[1], nil); !errors.Is(err, ErrRowIndex) {
			t.Fatalf("TimesRange(%d, %d): %v, want ErrRowIndex", bad[0], bad[1], err)
		}
	}
}

// TestTimeIndexRandom encodes random times of every kind, in blocks of
// random sizes or in one piece, and checks RowRange and TimesRange against
// the times.
func TestTimeIndexRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(37))
	modes := map[string]int{}
	for seed := range int64(400) {
		n := 1 + rng.Intn(300)
		if seed%10 == 0 {
			n = 1 + rng.Intn(3000)
		}
		kind := indexKinds[rng.Intn(len(indexKinds))]
		times := indexTimes(kind, n, seed)
		switch rng.Intn(8) {
		case 0: // duplicates
			for i := 1; i < n; i++ {
				if rng.Intn(3) == 0 {
					times[i] = times[i-1]
				}
			}
		case 1: // out of order
			i, j := rng.Intn(n), rng.Intn(n)
			times[i], times[j] = times[j], times[i]
		case 2: // whole seconds: scaled
			for i := range times {
				times[i] = times[i] / 1e9 * 1e9
			}
		case 3: // one time off the second: not scaled
			times[0] -= 1
		}
		enc := Encoder{blockRows: []int{0, 2, 3, 5, 8, 64}[rng.Intn(6)], forceBlocks: rng.Intn(2) == 0}
		buf, err := enc.Encode(nil, &Columns{Times: times})
		if err != nil {
			t.Fatal(err)
		}
		var r Reader
		if err := r.Reset(buf); err != nil {
			t.Fatal(err)
		}
		got, err := r.Times(nil)
		if err != nil || !slices.Equal(got, times) {
			t.Fatalf("seed %d: Times %v, want %v", seed, err, times)
		}
		mode, scaled := timeMode(t, buf)
		modes[fmt.Sprintf("mode %d sorted %v scaled %v", mode, slices.IsSorted(times), scaled)]++
		if mode == timeBlocks && !slices.IsSorted(times) {
			t.Fatalf("seed %d: unsorted times in blocks", seed)
		}
		checkRanges(t, buf, times, rng)
	}
	t.Log(modes)
	for _, m := range []byte{timeDoD, timeDeltas, timeBlocks} {
		for _, scaled := range []bool{false, true} {
			if modes[fmt.Sprintf("mode %d sorted true scaled %v", m, scaled)] == 0 {
				t.Errorf("no sorted column in mode %d, scaled %v: %v", m, scaled, modes)
			}
		}
	}
}

// TestTimeIndexEdges checks RowRange and TimesRange on the cases at the
// edges of blocks and ranges: one row, one time repeated, a bucket of just
// enough rows for blocks and one more, a last block of one row.
func TestTimeIndexEdges(t *testing.T) {
	const k = 4
	same := make([]int64, 50)
	for i := range same {
		same[i] = -7
	}
	dups := indexTimes("jitter-ns", 4*k+1, 3)
	for i := range dups {
		dups[i] = dups[i/3*3] // runs of three equal times, across block edges
	}
	tests := []struct {
		name   string
		times  []int64
		blocks bool // written in blocks
	}{
		{"one row", []int64{-1}, false},
		{"one time 50 times", same, true},
		{"two rows", []int64{math.MinInt64, math.MaxInt64}, false},
		{"fewer rows than blocks", indexTimes("exp-ns", timeBlocksMin*k-1, 1), false},
		{"exactly the blocks", indexTimes("exp-ns", timeBlocksMin*k, 1), true},
		{"one more row: a block of one", indexTimes("exp-ns", timeBlocksMin*k+1, 1), true},
		{"equal times across blocks", dups, true},
		{"whole seconds", indexTimes("gaps", 10*k+3, 1), true},
		{"span past MaxInt64", []int64{math.MinInt64, -5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, math.MaxInt64}, true},
	}
	rng := rand.New(rand.NewSource(1))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := Encoder{blockRows: k, forceBlocks: true}
			buf, err := enc.Encode(nil, &Columns{Times: tc.times})
			if err != nil {
				t.Fatal(err)
			}
			if mode, _ := timeMode(t, buf); (mode == timeBlocks) != tc.blocks {
				t.Fatalf("time column in mode %d, want blocks %v", mode, tc.blocks)
			}
			checkRanges(t, buf, tc.times, rng)
			var r Reader
			if err := r.Reset(buf); err != nil {
				t.Fatal(err)
			}
			n := len(tc.times)
			lo, hi := tc.times[0], tc.times[n-1]
			for _, c := range []struct {
				name        string
				lo, hi      int64
				first, last int
			}{
				{"all", lo, hi, 0, n},
				{"lo > hi", hi, lo, searchFirst(tc.times, hi), searchFirst(tc.times, hi)},
				{"before", lo - 2, lo - 1, 0, 0},
				{"after", hi + 1, hi + 2, n, n},
			} {
				if c.name == "lo > hi" && lo == hi || c.name == "before" && lo < math.MinInt64+2 || c.name == "after" && hi > math.MaxInt64-2 {
					continue
				}
				first, last, err := r.RowRange(c.lo, c.hi)
				if err != nil || first != c.first || last != c.last {
					t.Errorf("%s: RowRange(%d, %d) = [%d, %d) %v, want [%d, %d)", c.name, c.lo, c.hi, first, last, err, c.first, c.last)
				}
			}
		})
	}
}

// searchFirst returns the index of the first time at or above x.
func searchFirst(times []int64, x int64) int {
	return sort.Search(len(times), func(i int) bool { return times[i] >= x })
}

// blockedBucket returns a bucket of no fields whose time column is times
// in blocks of k rows as given, sorted or not, and with each block's
// bytes passed through edit.
func blockedBucket(times []int64, k int, edit func(j int, block []byte) []byte) []byte {
	var e Encoder
	minT, maxT := slices.Min(times), slices.Max(times)
	col := binary.AppendUvarint([]byte{timeBlocks}, uint64(k))
	var blocks []byte
	for j := 0; j*k < len(times); j++ {
		b := edit(j, e.appendTimesIn(nil, times[j*k:min((j+1)*k, len(times))], minT))
		if (j+1)*k < len(times) {
			col = binary.AppendUvarint(col, uint64(len(b)))
		}
		blocks = append(blocks, b...)
	}
	col = append(col, blocks...)
	buf := binary.AppendUvarint([]byte{Version}, uint64(len(times)))
	buf = appendVarint(buf, minT)
	buf = binary.AppendUvarint(buf, uint64(maxT-minT))
	buf = binary.AppendUvarint(buf, 0) // fields
	buf = binary.AppendUvarint(buf, uint64(len(col)))
	return append(buf, col...)
}

// TestTimeIndexCorrupt checks that RowRange, TimesRange and Times refuse a
// time column in blocks that breaks its rules.
func TestTimeIndexCorrupt(t *testing.T) {
	sorted := []int64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110}
	same := func(j int, b []byte) []byte { return b }
	var r Reader
	if err := r.Reset(blockedBucket(sorted, 4, same)); err != nil {
		t.Fatal(err)
	}
	if first, last, err := r.RowRange(15, 75); err != nil || first != 2 || last != 8 {
		t.Fatalf("the bucket as built: RowRange = [%d, %d) %v, want [2, 8)", first, last, err)
	}
	unsorted := slices.Clone(sorted)
	unsorted[5], unsorted[6] = unsorted[6], unsorted[5] // within block 1
	tests := []struct {
		name   string
		times  []int64
		edit   func(j int, b []byte) []byte
		lo, hi int64
	}{
		{"unsorted in a block", unsorted, same, 45, 75},
		{"block mode", sorted, func(j int, b []byte) []byte {
			if j == 1 {
				b[0] = timeBlocks
			}
			return b
		}, 45, 75},
		{"block one byte short", sorted, func(j int, b []byte) []byte {
			if j == 1 {
				b = b[:len(b)-1]
			}
			return b
		}, 45, 75},
		{"block one byte long", sorted, func(j int, b []byte) []byte {
			if j == 1 {
				b = append(b, 0)
			}
			return b
		}, 45, 75},
		{"block of one byte", sorted, func(j int, b []byte) []byte {
			if j == 1 {
				b = b[:1]
			}
			return b
		}, 45, 75},
		{"block of no bytes", sorted, func(j int, b []byte) []byte {
			if j == 1 {
				b = b[:0]
			}
			return b
		}, 45, 75},
		{"last block empty", sorted, func(j int, b []byte) []byte {
			if j == 2 {
				b = b[:0]
			}
			return b
		}, 45, 105},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Reset(blockedBucket(tc.times, 4, tc.edit)); err != nil {
				t.Fatal(err) // Reset reads no time column
			}
			if _, _, err := r.RowRange(tc.lo, tc.hi); !errors.Is(err, ErrCorrupt) {
				t.Errorf("RowRange: %v, want ErrCorrupt", err)
			}
			if _, err := r.TimesRange(4, 8, nil); !errors.Is(err, ErrCorrupt) {
				t.Errorf("TimesRange: %v, want ErrCorrupt", err)
			}
			if _, err := r.Times(nil); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Times: %v, want ErrCorrupt", err)
			}
		})
	}
	// The block rows: at least 2, fewer than the rows.
	for _, k := range []uint64{0, 1, 12, 13, 1 << 40} {
		buf := blockedBucket(sorted, 4, same)
		if err := r.Reset(buf); err != nil {
			t.Fatal(err)
		}
		i := r.timeOff // the time column's length is the byte before
		buf = slices.Concat(buf[:i+1], binary.AppendUvarint(nil, k), buf[i+2:])
		buf[i-1] = byte(int(buf[i-1]) + uvarintLen(k) - 1) // the time column's length
		if err := r.Reset(buf); err != nil {
			t.Fatalf("k %d: %v", k, err)
		}
		if _, _, err := r.RowRange(15, 75); !errors.Is(err, ErrCorrupt) {
			t.Errorf("k %d: RowRange: %v, want ErrCorrupt", k, err)
		}
	}
}

// fieldBuckets returns buckets of rows rows of ten int fields (the TSBS
// random walks, rounded) with times of kind.
func fieldBuckets(kind string, rows, n int) []Columns {
	rng := rand.New(rand.NewSource(3))
	var out []Columns
	for b := range n {
		cols := Columns{Times: indexTimes(kind, rows, int64(b))}
		for _, name := range tsbsFields {
			c := Column{Name: name, Type: TypeInt, Ints: make([]int64, rows)}
			x := rng.Float64() * 100
			for i := range c.Ints {
				c.Ints[i] = int64(math.Round(x))
				x = math.Min(100, math.Max(0, x+rng.NormFloat64()))
			}
			cols.Fields = append(cols.Fields, c)
		}
		out = append(out, cols)
	}
	return out
}

// TestTimeIndexSize weighs the blocks: the bytes a point of buckets as
// Hourglass writes them (names in a table), with time columns in one
// piece and with blocks where the encoder writes them. Regular times
// (TSBS) and buckets under 4 blocks have none; where blocks are written
// they cost at most 1/16 of the time column.
func TestTimeIndexSize(t *testing.T) {
	sets := []struct {
		name    string
		buckets []Columns
		blocked bool // some buckets in blocks
	}{
		{"tsbs int, 360 rows", tsbsBuckets(tsbsInt, 10), false},
		{"tsbs float, 360 rows", tsbsBuckets(tsbsFloat, 10), false},
	}
	for _, kind := range indexKinds {
		sets = append(sets, struct {
			name    string
			buckets []Columns
			blocked bool
		}{kind + ", 10 int fields, 1000 rows", fieldBuckets(kind, 1000, 20), kind != "regular" && kind != "gaps"})
	}
	for _, set := range sets {
		var one, blocks Encoder
		one.blockRows = -1
		var size [2]int
		points, timeBytes, blocked := 0, 0, 0
		var r Reader
		for i := range set.buckets {
			cols := &set.buckets[i]
			a, err := one.EncodeRefs(nil, cols, tsbsRefs)
			if err != nil {
				t.Fatal(err)
			}
			b, err := blocks.EncodeRefs(nil, cols, tsbsRefs)
			if err != nil {
				t.Fatal(err)
			}
			size[0] += len(a)
			size[1] += len(b)
			points += len(cols.Times) * len(cols.Fields)
			if err := r.ResetNames(a, tsbsFields); err != nil {
				t.Fatal(err)
			}
			timeBytes += r.timeLen
			if mode, _ := timeMode(t, b); mode == timeBlocks {
				blocked++
			}
			if len(b)-len(a) > r.timeLen/timeBlocksShare+1 {
				t.Errorf("%s: bucket %d: blocks cost %d bytes of a time column of %d", set.name, i, len(b)-len(a), r.timeLen)
			}
		}
		bpp0, bpp1 := float64(size[0])/float64(points), float64(size[1])/float64(points)
		t.Logf("%-36s %5.3f -> %5.3f bytes/point (%+.4f, %+.1f%%), time column %.2f bytes/row, %d of %d buckets in blocks",
			set.name, bpp0, bpp1, bpp1-bpp0, 100*(bpp1-bpp0)/bpp0, float64(timeBytes)*float64(len(tsbsFields))/float64(points), blocked, len(set.buckets))
		if (blocked > 0) != set.blocked {
			t.Errorf("%s: %d buckets in blocks, want some: %v", set.name, blocked, set.blocked)
		}
	}
}
