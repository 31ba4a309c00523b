package bench

import (
	"strings"
	"testing"
)

// The chaos check finds each kind of divergence from what the clients
// were told, and nothing when the rows are as told.
func TestChaosCompare(t *testing.T) {
	c := newChaosClients(nil, 1)
	c.rows = map[string][]uint8{
		"w0": {chaosAcked, chaosAcked, chaosDeleted, chaosMaybe, chaosSent},
		"w1": {chaosAcked},
		"w2": {},
	}
	good := map[string]bool{"w0/0": true, "w0/1": true, "w0/3": true, "w1/0": true}
	if n, vs, err := c.compare(good); err != nil || len(vs) != 0 || n != 3 {
		t.Fatalf("rows as told: %d checked, %v, %v", n, vs, err)
	}
	for _, tc := range []struct {
		change func(map[string]bool)
		want   string
	}{
		{func(r map[string]bool) { delete(r, "w0/1") }, "acknowledged row w0/1 is missing"},
		{func(r map[string]bool) { r["w0/2"] = true }, "row w0/2, removed by an acknowledged delete"},
		{func(r map[string]bool) { r["w1/1"] = true }, "row w1/1 was never sent"},
		{func(r map[string]bool) { r["w9/0"] = true }, "row w9/0 was never sent"},
		{func(r map[string]bool) { r["twice:w1/0"] = true }, "row w1/0 is stored twice"},
	} {
		rows := map[string]bool{}
		for k := range good {
			rows[k] = true
		}
		tc.change(rows)
		_, vs, _ := c.compare(rows)
		if len(vs) != 1 || !strings.Contains(vs[0], tc.want) {
			t.Errorf("want a violation %q, got %v", tc.want, vs)
		}
	}
}
