package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/hourglassdb/hourglass/api"
	"github.com/hourglassdb/hourglass/timeseries"
)

// ingestBody makes a body of about size bytes of iot-like points: a JSON
// array, NDJSON or line protocol. Sensors are a few hundred, timestamps
// one second apart per sensor.
func ingestBody(format string, size int) (body []byte, points int) {
	var b bytes.Buffer
	b.Grow(size + 256)
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	if format == "json" {
		b.WriteByte('[')
	}
	for i := 0; b.Len() < size; i++ {
		sensor := i % 500
		t := base.Add(time.Duration(i/500) * time.Second)
		temp := 18 + float64(i%97)/10
		switch format {
		case "json", "ndjson":
			if format == "json" && i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"timestamp":{"$date":"%s"},"sensor":{"id":"s%04d","site":"north","kind":"th"},"temp":%.1f,"hum":%d}`,
				t.Format(time.RFC3339), sensor, temp, 30+i%40)
			if format == "ndjson" {
				b.WriteByte('\n')
			}
		case "line":
			fmt.Fprintf(&b, "th,id=s%04d,site=north temp=%.1f,hum=%di %d\n", sensor, temp, 30+i%40, t.UnixNano())
		}
		points++
	}
	if format == "json" {
		b.WriteByte(']')
	}
	return b.Bytes(), points
}

// benchServer is a server on loopback over a DB in a temp dir, with a
// time-series collection "s" for JSON bodies (line protocol creates its
// own).
func benchServer(tb testing.TB) string {
	db, err := timeseries.Open(timeseries.Options{Dir: tb.TempDir(), NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := api.New(api.Options{DB: db})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	tb.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	post(tb, "PUT", hs.URL+"/v1/collections/s", "", []byte(`{"timeseries": {"timeField": "timestamp", "metaField": "sensor"}}`), 201)
	return hs.URL
}

func post(tb testing.TB, method, url, ctype string, body []byte, want int) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		tb.Fatalf("%s %s: %d, want %d: %.300s", method, url, resp.StatusCode, want, rb)
	}
}

// ingestRequest is where and how a body of format is sent.
func ingestRequest(url, format string) (string, string, int) {
	switch format {
	case "ndjson":
		return url + "/v1/collections/s/documents", "application/x-ndjson", 200
	case "line":
		return url + "/write?db=lp", "", 204
	}
	return url + "/v1/collections/s/documents", "application/json", 200
}

// BenchmarkInsertBody sends one body of 16 MiB per iteration through the
// real handler over loopback and reports points/s and the bytes allocated
// per body byte.
func BenchmarkInsertBody(b *testing.B) {
	for _, format := range []string{"json", "ndjson", "line"} {
		b.Run(format, func(b *testing.B) {
			body, points := ingestBody(format, 16<<20)
			url := benchServer(b)
			u, ct, want := ingestRequest(url, format)
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for range b.N {
				post(b, "POST", u, ct, body, want)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(len(body)), "alloc-bytes/body-byte")
		})
	}
}

// peakHeap posts body and returns the most live heap over the heap before
// it, read after a collection each time a chunk of it is decoded (the
// most a request holds), and the number of chunks.
func peakHeap(t *testing.T, u, ctype string, body []byte, want int) (peak uint64, chunks int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	api.OnChunkDecoded(func() {
		chunks++
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc-min(base, ms.HeapAlloc))
	})
	defer api.OnChunkDecoded(nil)
	post(t, "POST", u, ctype, body, want)
	return peak, chunks
}

// TestInsertMemoryBounded checks that one JSON insert holds at most a small
// multiple of its body: the live heap, measured after a collection at the
// moment a chunk is decoded and converted (the most a request holds), stays
// under twice the body plus 24 MiB for one chunk's documents,
// where decoding the whole body at once held some 25 times the body.
func TestInsertMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 16 MiB bodies")
	}
	for _, format := range []string{"json", "ndjson"} {
		t.Run(format, func(t *testing.T) {
			body, points := ingestBody(format, 8<<20)
			url := benchServer(t)
			u, ct, want := ingestRequest(url, format)
			peak, chunks := peakHeap(t, u, ct, body, want)
			limit := uint64(2*len(body) + 24<<20)
			t.Logf("%d points in %d bytes, %d chunks: peak live heap %d bytes over the baseline (%.2f per body byte), limit %d",
				points, len(body), chunks, peak, float64(peak)/float64(len(body)), limit)
			if chunks < 4 || peak > limit {
				t.Fatalf("one insert of %d bytes in %d chunks held %d bytes at its peak; want at most %d", len(body), chunks, peak, limit)
			}
		})
	}
}

// TestLineProtocolMemoryBounded checks that one line-protocol write holds
// its body and one chunk's measurements, not the whole body's: the live
// heap, measured after a collection each time a chunk is decoded (the most
// a request holds), stays under twice the body for a body of 49 MiB (the
// body, about 11 MiB for a chunk and the store's own growth as it takes
// 842,299 points: 1.6 times the body at the last chunk), where decoding
// the whole body at once held 14.6 times it.
func TestLineProtocolMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a 49 MiB body")
	}
	body, points := ingestBody("line", 49<<20)
	url := benchServer(t)
	u, ct, want := ingestRequest(url, "line")
	post(t, "POST", u, ct, []byte("th,id=s0000,site=north temp=1,hum=1i 1\n"), want) // the collection exists before the baseline
	peak, chunks := peakHeap(t, u, ct, body, want)
	limit := uint64(2 * len(body))
	t.Logf("%d points in %d bytes, %d chunks: peak live heap %d bytes over the baseline (%.2f per body byte), limit %d",
		points, len(body), chunks, peak, float64(peak)/float64(len(body)), limit)
	if chunks < 40 || peak > limit {
		t.Fatalf("one line-protocol write of %d bytes in %d chunks held %d bytes at its peak; want at most %d in at least 40 chunks", len(body), chunks, peak, limit)
	}
}
