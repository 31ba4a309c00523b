package ui_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConsoleServed checks the console's routes on a real server with a
// token: the assets need none, every API call still does.
func TestConsoleServed(t *testing.T) {
	s := startServer(t, "secret-token")
	get := func(method, path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := get("GET", "/ui/", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, `<script defer src="app.js"></script>`) {
		t.Fatalf("GET /ui/: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
	etag := resp.Header.Get("ETag")
	if resp, _ := get("GET", "/ui/", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation with ETag %s: %d, want 304", etag, resp.StatusCode)
	}
	for path, loc := range map[string]string{"/ui": "/ui/", "/": "/ui/"} {
		if resp, _ := get("GET", path, nil); resp.StatusCode/100 != 3 || resp.Header.Get("Location") != loc {
			t.Errorf("GET %s: %d to %q, want a redirect to %s", path, resp.StatusCode, resp.Header.Get("Location"), loc)
		}
	}
	for path, ct := range map[string]string{"/ui/app.js": "text/javascript; charset=utf-8", "/ui/app.css": "text/css; charset=utf-8", "/ui/favicon.svg": "image/svg+xml"} {
		resp, body := get("GET", path, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct || len(body) == 0 {
			t.Errorf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	if resp, _ := get("GET", "/ui/nope.js", nil); resp.StatusCode != 404 {
		t.Errorf("GET /ui/nope.js: %d", resp.StatusCode)
	}
	if resp, _ := get("POST", "/ui/", nil); resp.StatusCode != 405 {
		t.Errorf("POST /ui/: %d", resp.StatusCode)
	}
	if resp, _ := get("HEAD", "/ui/app.js", nil); resp.StatusCode != 200 {
		t.Errorf("HEAD /ui/app.js: %d", resp.StatusCode)
	}

	// The console does not open the API.
	for _, path := range []string{"/v1/status", "/v1/collections", "/v1/currentop", "/metrics"} {
		if resp, _ := get("GET", path, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, resp.StatusCode)
		}
		if resp, _ := get("GET", path, map[string]string{"Authorization": "Bearer wrong"}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, resp.StatusCode)
		}
	}
	if resp, body := get("GET", "/ui/../v1/status", nil); resp.StatusCode == 200 {
		t.Errorf("GET /ui/../v1/status without a token: 200 %s", body)
	}
	if resp, _ := get("GET", "/v1/status", map[string]string{"Authorization": "Bearer secret-token"}); resp.StatusCode != 200 {
		t.Errorf("GET /v1/status with the token: %d", resp.StatusCode)
	}
}
