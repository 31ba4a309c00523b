package timeseries

import (
	"testing"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// TestCollModIDIndex: the _id index that listIndexes lists cannot take a
// TTL; collMod on it, by name or by key pattern, is InvalidOptions (72),
// not IndexNotFound, and changes nothing.
func TestCollModIDIndex(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "p", CollectionOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []IndexMod{
		{Name: IDIndexName, ExpireAfterSeconds: 60},
		{KeyPattern: []IndexKey{{"_id", 1}}, ExpireAfterSeconds: 60},
	} {
		if _, err := db.CollModIndex(ctx, "p", m); mongoerr.CodeOf(err) != mongoerr.InvalidOptions {
			t.Errorf("collMod %+v: %v (code %d), want InvalidOptions", m, err, mongoerr.CodeOf(err))
		}
	}
	// Another key pattern on _id names no index.
	if _, err := db.CollModIndex(ctx, "p", IndexMod{KeyPattern: []IndexKey{{"_id", -1}}, ExpireAfterSeconds: 60}); mongoerr.CodeOf(err) != mongoerr.IndexNotFound {
		t.Errorf("collMod {_id: -1}: %v, want IndexNotFound", err)
	}
	idx, err := db.ListIndexes(ctx, "p")
	if err != nil || len(idx) != 1 || idx[0].Name != IDIndexName || idx[0].ExpireAfterSeconds != nil {
		t.Fatalf("indexes after: %+v, %v", idx, err)
	}
}
