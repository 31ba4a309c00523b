package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/api"
)

func TestInfluxWrite(t *testing.T) {
	s := newTestServer(t, nil)
	body := "cpu,host=a,region=eu usage_user=1.5,usage_idle=90i,ok=true,note=\"x y\" 1714564800\n" +
		"cpu,region=eu,host=a usage_user=2.5 1714564810\n" +
		"mem,host=a used=7i 1714564800\n"
	s.mustDo(204, "POST", "/write?db=telegraf&precision=s", body)
	r := s.mustDo(200, "GET", "/v1/collections/telegraf", "")
	desc := r.json(t)
	ts := desc["options"].(map[string]any)["timeseries"].(map[string]any)
	if ts["timeField"] != "time" || ts["metaField"] != "tags" || desc["count"].(float64) != 3 {
		t.Fatalf("created collection: %s", r.body)
	}
	rows := s.findRows("telegraf", `{"filter": {"tags._measurement": "cpu"}, "sort": {"time": 1}}`)
	if len(rows) != 2 {
		t.Fatalf("rows: %v", rows)
	}
	tags := rows[0]["tags"].(map[string]any)
	if tags["_measurement"] != "cpu" || tags["host"] != "a" || tags["region"] != "eu" {
		t.Fatalf("tags: %v", tags)
	}
	if rows[0]["time"].(map[string]any)["$date"] != "2024-05-01T12:00:00Z" || rows[0]["usage_user"].(float64) != 1.5 ||
		rows[0]["usage_idle"].(float64) != 90 || rows[0]["ok"] != true || rows[0]["note"] != "x y" {
		t.Fatalf("row: %v", rows[0])
	}
	// Both tag orders are one series: the second row has the same tags.
	if !equalJSON(rows[0]["tags"], rows[1]["tags"]) {
		t.Fatalf("tag order split a series: %v vs %v", rows[0]["tags"], rows[1]["tags"])
	}

	// v2 with ms precision, gzip.
	s.mustDo(204, "POST", "/api/v2/write?org=o&bucket=telegraf&precision=ms",
		string(gzipped(t, []byte("cpu,host=b usage_user=3 1714564800000\n"))), "Content-Encoding", "gzip")
	rows = s.findRows("telegraf", `{"filter": {"tags.host": "b"}}`)
	if len(rows) != 1 || rows[0]["time"].(map[string]any)["$date"] != "2024-05-01T12:00:00Z" {
		t.Fatalf("v2 rows: %v", rows)
	}

	// Partial write: good lines are kept; the first bad line is named.
	r = s.mustDo(400, "POST", "/write?db=telegraf&precision=s", "cpu,host=c v=1 1714564800\ncpu,host=c v= 1714564801\ncpu,host=c v=3 1714564802\ncpu,host=c bad\n")
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    int    `json:"line"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Code != "invalid" || e.Line != 2 || !strings.Contains(e.Message, "dropped 2") {
		t.Fatalf("partial write reply: %s", r.body)
	}
	if rows := s.findRows("telegraf", `{"filter": {"tags.host": "c"}}`); len(rows) != 2 {
		t.Fatalf("good lines of a partial write: %v", rows)
	}
	// A line the collection refuses (a field named like the timeField).
	r = s.mustDo(400, "POST", "/write?db=telegraf&precision=s", "cpu,host=d v=1 1714564800\ncpu,host=d time=2 1714564801\n")
	if err := json.Unmarshal(r.body, &e); err != nil || e.Line != 2 {
		t.Fatalf("refused line reply: %s", r.body)
	}

	for _, c := range []struct{ path, body string }{
		{"/write", "cpu v=1"},
		{"/api/v2/write?org=o", "cpu v=1"},
		{"/write?db=x&precision=fortnights", "cpu v=1"},
		{"/api/v2/write?bucket=x&precision=h", "cpu v=1"}, // v2 has no h
		{"/write?db=" + url.QueryEscape("bad name"), "cpu v=1"},
	} {
		r := s.mustDo(400, "POST", c.path, c.body)
		if !strings.Contains(string(r.body), `"code":"invalid"`) {
			t.Errorf("%s: %s", c.path, r.body)
		}
	}
	s.mustDo(201, "PUT", "/v1/collections/plain", "")
	s.mustDo(400, "POST", "/write?db=plain", "cpu v=1")
	s.mustDo(404, "GET", "/v1/collections/x", "") // refused writes create nothing
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestInfluxQuery(t *testing.T) {
	s := newTestServer(t, nil)
	r := s.mustDo(200, "POST", "/query?q="+url.QueryEscape(`CREATE DATABASE "telegraf"`), "")
	if !strings.Contains(string(r.body), `"statement_id":0`) || strings.Contains(string(r.body), "error") {
		t.Fatalf("create database: %s", r.body)
	}
	s.mustDo(200, "POST", "/query", "q="+url.QueryEscape("CREATE DATABASE metrics WITH DURATION 1d"), "Content-Type", "application/x-www-form-urlencoded")
	r = s.mustDo(200, "GET", "/query?q="+url.QueryEscape("SHOW DATABASES"), "")
	var res struct {
		Results []struct {
			Series []struct {
				Values [][]string `json:"values"`
			} `json:"series"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || len(res.Results) != 1 || len(res.Results[0].Series) != 1 {
		t.Fatalf("show databases: %v %s", err, r.body)
	}
	if v := res.Results[0].Series[0].Values; len(v) != 2 || v[0][0] != "metrics" || v[1][0] != "telegraf" {
		t.Fatalf("databases: %v", v)
	}
	s.mustDo(400, "POST", "/query?q="+url.QueryEscape("SELECT * FROM cpu"), "")
	s.mustDo(400, "POST", "/query", "")
}

// TestInfluxWriteChunks checks that a body decoded and stored a chunk at a
// time answers as one whole write would: the first bad line of the body
// named by its line number, wherever its chunk, the counts of all chunks,
// the good lines of every chunk stored, and a string value running over
// the line ends at a chunk boundary kept whole. The body's first chunk is
// all good, its second holds a line the collection refuses and its third
// one that does not parse.
func TestInfluxWriteChunks(t *testing.T) {
	s := newTestServer(t, func(o *api.Options) { o.MaxBody = 16 << 20 })
	var b strings.Builder
	lines, refused, broken := 0, 0, 0
	for b.Len() < 3<<20+500 {
		lines++
		switch {
		case b.Len() > 1<<20+1000 && refused == 0:
			refused = lines
			fmt.Fprintf(&b, "cpu,host=h%d time=1 %d\n", lines%50, 1714564800+lines) // the collection refuses it
		case b.Len() > 2<<20+1000 && broken == 0:
			broken = lines
			b.WriteString("cpu,host=x v=\n") // does not parse
		case b.Len() > 1<<20-40 && b.Len() < 1<<20:
			// A string over three lines across the first chunk's end.
			fmt.Fprintf(&b, "cpu,host=s note=\"a\nb\nc\" %d\n", 1714564800+lines)
			lines += 2
		default:
			fmt.Fprintf(&b, "cpu,host=h%d v=%di %d\n", lines%50, lines, 1714564800+lines)
		}
	}
	entries := lines - 2 // the string's entry spans three lines
	r := s.mustDo(400, "POST", "/write?db=big&precision=s", b.String())
	var e struct {
		Message string `json:"message"`
		Line    int    `json:"line"`
	}
	want := fmt.Sprintf("dropped 2 of %d lines, wrote %d", entries, entries-2)
	if err := json.Unmarshal(r.body, &e); err != nil || e.Line != refused || !strings.HasPrefix(e.Message, fmt.Sprintf("partial write: line %d refused: ", refused)) ||
		!strings.HasSuffix(e.Message, want) {
		t.Fatalf("reply %s; want line %d refused, %q", r.body, refused, want)
	}
	desc := s.mustDo(200, "GET", "/v1/collections/big", "").json(t)
	if desc["count"].(float64) != float64(entries-2) {
		t.Fatalf("count %v, want %d", desc["count"], entries-2)
	}
	rows := s.findRows("big", `{"filter": {"tags.host": "s"}}`)
	if len(rows) != 1 || rows[0]["note"] != "a\nb\nc" {
		t.Fatalf("the string across the chunk boundary: %v", rows)
	}
}
