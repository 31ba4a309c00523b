// Package duckdbtest checks that the Parquet files an archive pass writes
// (docs/archive.md) are read as they are by DuckDB, a Parquet engine
// Hourglass does not control: a loopback Hourglass archives a collection,
// and DuckDB's per-sensor count and average over the archive directory
// must equal Hourglass' own aggregate of the same data.
//
// The package holds tests only. DuckDB is the npm package
// @duckdb/node-api pinned in package.json and package-lock.json, installed
// into node_modules by `make deps` (`npm ci --prefix archive/duckdbtest`),
// which `make test` runs first. Without node or that package the tests
// fail, naming what to install; `go test -short` skips them.
package duckdbtest
