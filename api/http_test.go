package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// OPTIONS * is refused with 400, as net/http's ServeMux refuses it, when
// the http.Server lets it through (as hourglass serve does).
func TestOptionsStar(t *testing.T) {
	db, err := timeseries.Open(timeseries.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv, err := api.New(api.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.DisableGeneralOptionsHandler = true
	hs.Start()
	defer hs.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "OPTIONS * is not served") {
		t.Fatalf("OPTIONS *: %d %s", resp.StatusCode, b)
	}
}

// HEAD on a GET query answers as GET does, without the body.
func TestHeadQuery(t *testing.T) {
	s := newTestServer(t, nil)
	s.createSensors("s")
	s.mustDo(200, "POST", "/v1/collections/s/documents", sensorDocs)
	for _, p := range []string{
		`/v1/collections/s/find?q={"limit":2}`,
		`/v1/collections/s/aggregate?q={"window":"1m","fields":["temp"]}`,
	} {
		get := s.mustDo(200, "GET", p, "")
		head := s.mustDo(200, "HEAD", p, "")
		if len(head.body) != 0 || head.header.Get("Content-Type") != get.header.Get("Content-Type") || len(get.body) == 0 {
			t.Fatalf("HEAD %s: %v %q; GET: %v", p, head.header, head.body, get.header)
		}
	}
	s.mustDo(400, "HEAD", `/v1/collections/s/find?q={"bad":1}`, "")
}

// The console's files are open (no token) because they hold no data: the
// same bytes on a server with data and a token as on an empty one.
func TestConsoleAssetsHoldNoData(t *testing.T) {
	empty := newTestServer(t, nil)
	full := newTestServer(t, func(o *api.Options) { o.AuthToken = "console-secret-token" })
	full.createSensors("console_private_data")
	full.mustDo(200, "POST", "/v1/collections/console_private_data/documents", sensorDocs)
	open := *full
	open.token = ""
	open.mustDo(401, "GET", "/v1/collections", "")
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css", "/ui/favicon.svg"} {
		a := empty.mustDo(200, "GET", p, "")
		b := open.mustDo(200, "GET", p, "")
		if !bytes.Equal(a.body, b.body) || bytes.Contains(b.body, []byte("console_private_data")) ||
			bytes.Contains(b.body, []byte("console-secret-token")) {
			t.Fatalf("%s differs between servers or holds their data (%d and %d bytes)", p, len(a.body), len(b.body))
		}
	}
}
