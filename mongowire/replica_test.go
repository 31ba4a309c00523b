package mongowire

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A secondary answers a read only when the command's $readPreference
// allows it; none, or mode primary, asks for the primary.
func TestSecondaryOk(t *testing.T) {
	for _, c := range []struct {
		cmd  bson.D
		want bool
	}{
		{bson.D{{Key: "find", Value: "m"}}, false},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primary"}}}}, false},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$readPreference", Value: "secondary"}}, false},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primaryPreferred"}}}}, true},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondary"}}}}, true},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "nearest"}, {Key: "maxStalenessSeconds", Value: 90}}}}, true},
	} {
		body, err := bson.Marshal(c.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got := secondaryOk(&wireCommand{body: body}); got != c.want {
			t.Errorf("%v: secondaryOk = %v, want %v", c.cmd, got, c.want)
		}
	}
}
