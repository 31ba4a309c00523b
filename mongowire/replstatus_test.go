package mongowire

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestReplSetGetStatusStandalone checks that a server outside a replica
// set answers replSetGetStatus as a standalone MongoDB does:
// NoReplicationEnabled (76).
func TestReplSetGetStatusStandalone(t *testing.T) {
	_, _, addr := startServer(t, Options{})
	cl := connect(t, addr, "")
	err := cl.Database("admin").RunCommand(context.Background(), bson.D{{Key: "replSetGetStatus", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 76 || ce.Name != "NoReplicationEnabled" {
		t.Fatalf("replSetGetStatus on a standalone server: %v", err)
	}
}
