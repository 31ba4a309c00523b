package timeseries

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/model"
)

// TestPruneByFieldRange checks that passing over buckets by their fields'
// control min/max never changes a find's result: random filters on random
// data, against the same filter wrapped in a double $nor, which means the
// same but sets no range (so nothing is passed over).
func TestPruneByFieldRange(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	mustCreate(t, db, "m", model.TimeSeriesOptions{TimeField: "ts", MetaField: "s"})
	rng := rand.New(rand.NewSource(11))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []model.Measurement
	walk := map[string]int64{}
	for i := 0; i < 6000; i++ {
		s := []string{"a", "b", "c"}[i%3]
		walk[s] += rng.Int63n(7) - 3
		m := model.Measurement{Time: t0.Add(time.Duration(rng.Int63n(int64(12 * time.Hour)))).UnixNano(), Meta: s}
		m.Fields = append(m.Fields, model.Field{Name: "x", Value: model.Int(walk[s])})
		y := float64(walk[s]) / 4
		switch rng.Intn(50) {
		case 0:
			y = math.NaN()
		case 1:
			y = math.Inf(1)
		}
		m.Fields = append(m.Fields, model.Field{Name: "y", Value: model.Float(y)})
		if rng.Intn(3) == 0 {
			m.Fields = append(m.Fields, model.Field{Name: "z", Value: model.Int(rng.Int63n(10))})
		}
		if s == "c" && i > 4000 {
			m.Fields = append(m.Fields, model.Field{Name: "w", Value: model.String(fmt.Sprint(rng.Intn(5)))})
		} else {
			m.Fields = append(m.Fields, model.Field{Name: "w", Value: model.Int(rng.Int63n(5))})
		}
		ms = append(ms, m)
	}
	if _, err := db.Insert(ctx, "m", Batch{Measurements: ms}, InsertOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	ops := []string{"$gt", "$gte", "$lt", "$lte", "$eq"}
	val := func() string {
		switch rng.Intn(4) {
		case 0:
			return fmt.Sprintf("%d.5", rng.Intn(40)-20)
		case 1:
			return fmt.Sprintf(`"%d"`, rng.Intn(5))
		default:
			return fmt.Sprint(rng.Intn(40) - 20)
		}
	}
	cond := func() string {
		f := []string{"x", "y", "z", "w"}[rng.Intn(4)]
		if rng.Intn(5) == 0 {
			return fmt.Sprintf(`"%s": {"$in": [%d, %d]}`, f, rng.Intn(20)-10, rng.Intn(20)-10)
		}
		if rng.Intn(3) == 0 {
			return fmt.Sprintf(`"%s": {"$gte": %s, "$lt": %s}`, f, val(), val())
		}
		return fmt.Sprintf(`"%s": {"%s": %s}`, f, ops[rng.Intn(len(ops))], val())
	}
	matched := 0
	for i := 0; i < 300; i++ {
		c := cond()
		if rng.Intn(3) == 0 {
			if c2 := cond(); c2[:4] != c[:4] {
				c += ", " + c2
			}
		}
		filter := "{" + c + "}"
		got := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, filter)})
		want := findRows(t, db, "m", FindOptions{Filter: mustFilter(t, `{"$nor": [{"$nor": [`+filter+`]}]}`)})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d rows, %d without pruning", filter, len(got), len(want))
		}
		if len(got) > 0 {
			matched++
		}
	}
	if matched < 50 {
		t.Fatalf("only %d of 300 filters matched rows", matched)
	}
}
