package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
)

// slowSender opens a connection that announces a body of announced bytes
// and sends only the first few.
func slowSender(t *testing.T, url, path string, announced int, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, announced, first)
	return c
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *testServer) inProgress() int {
	s.t.Helper()
	return len(s.mustDo(200, "GET", "/v1/currentop", "").json(s.t)["inprog"].([]any))
}

// Bodies that trickle in hold no ingest slot, so other writes go on; past
// the grace period a body that falls below the minimum rate is refused with
// 408 and the documented message.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	const grace = 2 * time.Second
	s := newTestServer(t, func(o *api.Options) {
		o.MaxConcurrentWrites, o.MaxQueuedWrites = 1, -1 // any slot held by a slow body refuses the next write
		o.MaxBody, o.MaxBodyMemory = 1<<20, 8<<20
		o.MinBodyRate, o.BodyRateGrace = 64<<10, grace
	})
	s.createSensors("s")
	s.mustDo(201, "PUT", "/v1/collections/plain", "")
	start := time.Now()
	var slow []net.Conn
	for _, p := range []string{"/v1/collections/s/documents", "/v1/collections/plain/documents", "/write?db=s", "/v1/collections/s/documents"} {
		slow = append(slow, slowSender(t, s.url, p, 1000000, "[{"))
	}
	waitFor(t, "four slow bodies in progress", func() bool { return s.inProgress() == 4 })
	if n := s.srv.WriteSlotsInUse(); n != 0 {
		t.Fatalf("%d ingest slots held by bodies still arriving", n)
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	s.mustDo(200, "POST", "/v1/collections/plain/documents", `[{"_id": 1}]`)
	s.mustDo(204, "POST", "/write?db=s", "cpu v=1")
	if n := s.inProgress(); n != 4 || time.Since(start) >= grace {
		t.Fatalf("the writes did not run while the slow bodies arrived (%d in progress after %s)", n, time.Since(start))
	}
	for i, c := range slow {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("slow sender %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "arrived too slowly") ||
			!strings.Contains(string(b), "65536 bytes/s after the first 2s") {
			t.Fatalf("slow sender %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if took := time.Since(start); took < grace {
		t.Fatalf("slow bodies refused after %s, before the grace period of %s", took, grace)
	}
	if n := s.count("s"); n != 5 {
		t.Fatalf("count %d, want 5 (the slow bodies store nothing)", n)
	}
	waitFor(t, "the slow bodies' memory given back", func() bool { return s.srv.BodyMemoryInUse() == 0 })
}

// Bodies being received share one memory budget: past it a write is
// refused with 429 rather than buffered, and the budget follows the bytes
// that arrived, not the length a client announces.
func TestBodyMemoryBudget(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) {
		// Room for the two bodies below (64 KiB for the first bytes of one,
		// the 1 MiB buffer class holding the announced length of the
		// other) and 100 bytes more.
		o.MaxBody, o.MaxBodyMemory = 1<<20, 64<<10+1<<20+100
		o.MinBodyRate = -1
	})
	s.createSensors("s")
	// A reply can reach the client before its request's body is given
	// back: start from nothing held.
	waitFor(t, "the create's body given back", func() bool { return s.srv.BodyMemoryInUse() == 0 })
	// Announcing a megabyte and sending 40 KB holds its first chunk only.
	slowSender(t, s.url, "/v1/collections/s/documents", 1000000, "[{"+strings.Repeat(" ", 40000))
	waitFor(t, "the slow body's first chunk", func() bool { return s.srv.BodyMemoryInUse() >= 64<<10 })
	if n := s.srv.BodyMemoryInUse(); n > 64<<10 {
		t.Fatalf("a body of 40,002 bytes received holds %d bytes", n)
	}
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	// Sending most of another holds the budget: the next write is refused.
	big := slowSender(t, s.url, "/v1/collections/s/documents", 1000000, "[{")
	big.Write([]byte(strings.Repeat(" ", 600000)))
	waitFor(t, "the large body received", func() bool { return s.srv.BodyMemoryInUse() > 900000 })
	r := s.mustDo(429, "POST", "/v1/collections/s/documents", sensorDocs)
	if r.header.Get("Retry-After") == "" || r.errorCode(t) != 462 || !strings.Contains(string(r.body), "body memory") {
		t.Fatalf("429 reply: %v %s", r.header, r.body)
	}
	big.Close()
	waitFor(t, "the large body's memory given back", func() bool { return s.srv.BodyMemoryInUse() <= 64<<10 })
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	if n := s.count("s"); n != 8 {
		t.Fatalf("count %d, want 8", n)
	}
}
