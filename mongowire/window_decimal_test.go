package mongowire

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestExpMovingAvgDecimal: $expMovingAvg answers a Decimal128 once it
// has read one, as MongoDB does (a double before), and takes N and alpha
// as decimals (exp_moving_avg.js: alpha NumberDecimal("1.0E-1")). Its
// value is computed in double precision (MongoDB's in 34 decimal digits):
// it agrees to a double's.
func TestExpMovingAvgDecimal(t *testing.T) {
	f := newFixture(t, nil)
	var js []string
	for i := range 10 {
		price := fmt.Sprintf(`{"$numberDecimal": "%d.25"}`, 500-i*10)
		if i < 2 {
			price = fmt.Sprintf("%d.25", 500-i*10) // doubles first
		}
		js = append(js, fmt.Sprintf(`{"_id": %d, "price": %s}`, i, price))
	}
	c := plainColl(t, f, "emadec", "["+strings.Join(js, ",")+"]")
	for _, p := range []struct {
		spec  string
		alpha float64
	}{{`"N": 3`, 0.5}, {`"alpha": {"$numberDecimal": "1.0E-1"}`, 0.1}, {`"N": {"$numberDecimal": "3"}`, 0.5}} {
		cur, err := c.Aggregate(context.Background(), pipe(t, `[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"e": {"$expMovingAvg": {"input": "$price", `+p.spec+`}}}}}]`))
		if err != nil {
			t.Fatalf("%s: %v", p.spec, err)
		}
		var out []bson.Raw
		if err := cur.All(context.Background(), &out); err != nil {
			t.Fatal(err)
		}
		if len(out) != 10 {
			t.Fatalf("%s: %d documents", p.spec, len(out))
		}
		var want float64
		for i, d := range out {
			x := float64(500-i*10) + 0.25
			if i == 0 {
				want = x
			} else {
				want = x*p.alpha + want*(1-p.alpha)
			}
			e := d.Lookup("e")
			var got float64
			switch {
			case i < 2:
				if e.Type != bson.TypeDouble {
					t.Fatalf("%s: document %d: e is %s, want a double (no decimal read yet)", p.spec, i, e.Type)
				}
				got = e.Double()
			default:
				dec, ok := e.Decimal128OK()
				if !ok {
					t.Fatalf("%s: document %d: e is %s %v, want a Decimal128", p.spec, i, e.Type, e)
				}
				fmt.Sscan(dec.String(), &got)
			}
			if math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s: document %d: e %v, want %v", p.spec, i, got, want)
			}
		}
	}
}
