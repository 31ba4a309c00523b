package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// tourCommands returns the shell commands of the README's "Five minutes
// with curl" block, one a command (continuation lines and multi-line quoted
// arguments joined as written), without the comments between them.
func tourCommands(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, "## Five minutes with curl")
	if !ok {
		return nil, fmt.Errorf("README.md has no section \"Five minutes with curl\"")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		return nil, fmt.Errorf("the tour has no sh block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, fmt.Errorf("the tour's sh block does not end")
	}
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if cur.Len() == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		cur.WriteString(line + "\n")
		text := cur.String()
		if strings.Count(text, "'")%2 == 0 && !strings.HasSuffix(line, `\`) {
			cmds = append(cmds, strings.TrimSpace(text))
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("the tour ends inside a command: %q", cur.String())
	}
	return cmds, nil
}

// TestReadmeTour runs the README's tour as written, with bash and curl,
// against a server on a fresh data directory (the port is the only thing
// changed), and checks the replies the README shows or promises: the tour
// must read true whenever it is typed, its data kept by the retention step.
func TestReadmeTour(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's tour is run with bash and curl: %s is missing (on Debian: apt-get install %s)", tool, tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := tourCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, t.TempDir())
	host := strings.TrimPrefix(srv.url, "http://")

	// One script, so that the tour's variables carry from a command to the
	// next; a marker after each command splits the output.
	var script strings.Builder
	script.WriteString("set -u\n")
	for i, c := range cmds {
		if !strings.Contains(c, "localhost:7700") && !strings.HasPrefix(c, "T=") {
			t.Fatalf("command %d talks to no server on localhost:7700: %s", i, c)
		}
		fmt.Fprintf(&script, "%s\nprintf '\\n@@@ %d %%s\\n' $?\n", strings.ReplaceAll(c, "localhost:7700", host), i)
	}
	cmd := exec.Command("bash", "-c", script.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s\n%s", err, out, stderr.String())
	}
	replies := map[string]string{} // command's first words -> output
	rest := string(out)
	for i, c := range cmds {
		marker := regexp.MustCompile(fmt.Sprintf(`\n@@@ %d (\d+)\n`, i))
		m := marker.FindStringSubmatchIndex(rest)
		if m == nil {
			t.Fatalf("no output of command %d (%s):\n%s", i, c, out)
		}
		if code := rest[m[2]:m[3]]; code != "0" {
			t.Fatalf("%s\nexited with %s; stderr:\n%s", c, code, stderr.String())
		}
		replies[c] = rest[:m[0]]
		rest = rest[m[1]:]
	}
	reply := func(prefix string) string {
		t.Helper()
		if r, ok := replies[prefix]; ok {
			return r // the whole command
		}
		for _, c := range cmds {
			if strings.HasPrefix(c, prefix) {
				return replies[c]
			}
		}
		t.Fatalf("the tour has no command %q...", prefix)
		return ""
	}
	for _, c := range []struct{ prefix, want string }{
		{"curl -X PUT localhost:7700/v1/collections/weather", `"type":"timeseries"`},
		{"curl localhost:7700/v1/collections/weather/documents", `{"inserted":3}`},
		{"curl -i 'localhost:7700/write?db=telegraf'", "HTTP/1.1 204 No Content"},
		{"curl -X PATCH localhost:7700/v1/collections/weather", `"expireAfterSeconds_new":86400`},
		{"curl localhost:7700/v1/collections/weather/indexes", `"name":"south_hour"`},
		{"curl localhost:7700/v1/collections/weather", `"count":3`},
		{"curl localhost:7700/v1/collections/weather", `"buckets":2`},
		{"curl localhost:7700/v1/status", `"ok":1`},
	} {
		if got := reply(c.prefix); !strings.Contains(got, c.want) {
			t.Errorf("%s\nreplied %s\nwant %s", c.prefix, got, c.want)
		}
	}
	// Newest first: 21.0 (at :30) before 20.5 (at :00), and nothing of south.
	if got := reply("curl localhost:7700/v1/collections/weather/find"); strings.Count(got, `"sensor":"north"`) != 2 ||
		strings.Index(got, `"temp":21`) > strings.Index(got, `"temp":20.5`) || strings.Contains(got, "south") {
		t.Errorf("find replied %s", got)
	}
	if got := reply("curl -H 'Accept: text/csv'"); !strings.Contains(got, "north") || !strings.Contains(got, "south") ||
		!strings.Contains(got, "20.75") {
		t.Errorf("aggregate replied %s", got)
	}
	// The retention step keeps the data: a TTL pass now deletes nothing,
	// and the counts stay.
	status, body, err := srv.post(t, "/v1/admin/ttl/run", "application/json", "")
	if err != nil || status != 200 || !strings.Contains(string(body), `"deletedDocuments":0`) {
		t.Fatalf("TTL pass after the tour: %d %s %v", status, body, err)
	}
	out, err = exec.Command("curl", "-s", srv.url+"/v1/collections/weather").Output()
	if err != nil || !strings.Contains(string(out), `"count":3`) {
		t.Fatalf("after a TTL pass: %s %v", out, err)
	}
}
