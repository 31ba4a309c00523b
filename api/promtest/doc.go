// Package promtest holds tests only: a real Prometheus server scrapes
// itself and remote-writes its samples to an api.Server on a loopback
// port, and the stored series are checked through the HTTP API.
package promtest
