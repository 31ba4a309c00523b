// Package mongoshtest runs mongosh, MongoDB's shell, against a
// mongowire.Server on a loopback port: the scripts in testdata/ are the
// sessions a MongoDB user types, and the tests check what mongosh printed
// against what was inserted and against the engine behind the HTTP API.
//
// The package holds tests only. mongosh is the npm package pinned in
// package.json and package-lock.json, installed into node_modules by
// `make deps` (`npm ci --prefix mongowire/mongoshtest`), which `make test`
// runs first. Without node or that package the tests fail, naming what to
// install; `go test -short` skips them.
package mongoshtest
