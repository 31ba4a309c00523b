// Package backup takes online backups of a store into an object store
// (objstore: a directory or an S3 bucket), lists, verifies and prunes
// them, and restores one into a data directory. docs/backup.md is the
// operator's guide.
//
// A backup is an image of the store (timeseries.DB.Backup: a Pebble
// checkpoint and the log segments that go with it) copied file by file.
// Files are stored once, under a key made of their name, size and SHA-256
// ("files/000012.sst.2097152.<sha256>"): a file the target already holds
// is not copied again, so a backup after the first copies what changed
// (new tables, the log, Pebble's manifest). The backup's manifest lists
// every file with its size and checksum, and is written last
// ("backups/<id>/manifest"), once every file it names is durable: a backup
// without one is incomplete, and is never listed, verified or restored as
// a backup. Restore checks every byte against the manifest before the
// data directory appears.
//
// A backup of a replica set member's engine also records, in the
// manifest's Member, the member's raft state at the index its image holds
// (what the DB's backup hook returned); replset.Seed makes a new member of
// the restored engine with it.
//
// Layout of a target:
//
//	backups/<id>/pending    written first, removed once the manifest is durable
//	backups/<id>/manifest   the manifest: JSON, then "sha256 <hex>\n" of the JSON
//	files/<name>.<size>.<sha256>   the files, shared by every backup
//
// Usage:
//
//	st, err := objstore.Open(ctx, "file:///var/backups/hourglass", objstore.Options{})
//	if err != nil { ... }
//	defer st.Close()
//	res, err := backup.Create(ctx, db, st, backup.Options{})    // res.ID names it
//	...
//	m, err := backup.Restore(ctx, st, "", "/var/lib/hourglass-restored", backup.Options{})  // "": the newest
package backup
