// Package pymongotest holds tests only: PyMongo, the Python driver, runs a
// sensor session against a mongowire.Server on a loopback port, every
// result checked in Python and the stored data checked from Go.
package pymongotest
