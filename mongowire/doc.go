// Package mongowire answers MongoDB clients (mongosh, the official drivers)
// over MongoDB's wire protocol, on the same engine as the HTTP API: a
// collection created through one is seen through the other.
//
// It reads OP_MSG (checksums, document sequences), OP_COMPRESSED (zstd,
// snappy, zlib) and the OP_QUERY handshake, and answers the commands
// docs/mongodb.md lists with MongoDB's reply shapes and error codes. Every
// database name but admin, local and config names the engine's one set of
// collections. aggregate runs on the engine's find and windowed aggregate.
// With Options.AuthToken, clients authenticate with SCRAM-SHA-256 as
// AuthUser. BSON and wire messages are read and built with the MongoDB Go
// driver's bsoncore and wiremessage packages.
//
// # Usage
//
//	srv, err := mongowire.New(mongowire.Options{DB: db, TTL: monitor, Logger: log})
//	if err != nil {
//		return err
//	}
//	ln, err := net.Listen("tcp", "127.0.0.1:27017")
//	if err != nil {
//		return err
//	}
//	go srv.Serve(ln) // returns ErrServerClosed after Shutdown
//	...
//	err = srv.Shutdown(ctx) // commands in progress finish; cursors close
package mongowire
