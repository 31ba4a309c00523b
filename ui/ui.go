// Package ui is the Hourglass web console: a single-page application that
// manages collections and their retention, previews expiry and plots series,
// reading and writing through the public HTTP API only.
//
// The console's sources are TypeScript in web/; "npm run build" (or
// "go generate ./ui", or "make ui") bundles them with esbuild into dist/,
// which is committed and embedded in the binary, so the server needs
// nothing else at run time. TestDistUpToDate checks that dist/ is a fresh
// build of the sources.
//
// The assets carry no data: the handler serves them without authentication,
// and every API call the console makes carries the bearer token the user
// gives it.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:generate npm run build

//go:embed dist
var dist embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// contentTypes names the type of every kind of file the build writes, so
// that the reply does not depend on the host's MIME tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".txt":  "text/plain; charset=utf-8",
}

// csp allows the console's own script, styles and API calls, and nothing
// else. Inline styles are allowed because the chart library positions its
// elements with them.
const csp = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console: index.html for /ui and /ui/, the bundled
// assets under /ui/. Replies carry a strong ETag and "Cache-Control:
// no-cache" (asset names are not content-hashed, so a browser revalidates
// and gets 304 until the binary changes). It is safe for concurrent use.
func Handler() http.Handler {
	assets := map[string]*asset{}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			ct = "application/octet-stream"
		}
		assets[strings.TrimPrefix(p, "dist/")] = &asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil || assets["index.html"] == nil {
		// The embedded tree is part of the binary: a broken one is a
		// build fault, not a run-time condition.
		panic("ui: embedded dist is missing index.html; run `make ui`")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if name == "" {
			name = "index.html"
		}
		a := assets[name]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if name == "index.html" {
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
		}
		// ServeContent answers If-None-Match from the ETag set above,
		// and Range and HEAD requests.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
