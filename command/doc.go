// Package command is the command layer of Hourglass: what every front door
// (the HTTP API, the MongoDB wire protocol, the Prometheus endpoints)
// shares, between their protocols and the engine. A door decodes its
// protocol into the layer's terms, calls it, and encodes the answer; what a
// request means is decided once, here and below.
//
// A Service serves one engine and every door of a server:
//
//   - Classify, the one table from errors to the MongoDB code and name, the
//     HTTP status and the Prometheus errorType, naming the primary at the
//     door's address on a replica set follower's refusal;
//   - Ops, the one registry of operations in progress, which MongoDB's
//     currentOp and the HTTP API's /v1/currentop both list;
//   - admission: Ingest, the slots and bounded queue writes take, and
//     Bodies, the request memory budget HTTP bodies and MongoDB messages
//     are read into; the reclaimers that let idle cursors give their query
//     memory back (AddReclaimer);
//   - Writer, through which every write goes: the engine on a server of its
//     own, the replica set's member otherwise, with CheckWrite and
//     BeforeRead for what a member may serve;
//   - the commands whose rules the doors shared: Projection, CollMod,
//     CreateIndex;
//   - Pipeline, an aggregation pipeline planned and run here for both
//     doors: stages as MongoDB writes them (BSON; the HTTP door reads its
//     Extended JSON into BSON first), documents out with their field order
//     (DocOrder), or a find for the door to run as its finds.
//
// Usage:
//
//	svc, err := command.New(command.Options{DB: db, TTL: monitor})
//	if err != nil {
//		return err
//	}
//	httpAPI, err := api.New(api.Options{Commands: svc})
//	wire, err := mongowire.New(mongowire.Options{Commands: svc})
//	// Both doors now list each other's operations and share the ingest
//	// slots, the request memory and the writer.
package command
