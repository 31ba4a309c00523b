package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiClient sends requests to one Hourglass server's HTTP API.
type apiClient struct {
	base string
	hc   *http.Client
}

func newAPIClient(base string) *apiClient {
	return &apiClient{base: strings.TrimRight(base, "/"), hc: &http.Client{
		Timeout:   2 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second},
	}}
}

// close drops the client's idle connections.
func (c *apiClient) close() { c.hc.CloseIdleConnections() }

// do sends a request and returns the status and the body of the reply. err
// is a transport error (no reply: the server may or may not have acted).
func (c *apiClient) do(ctx context.Context, method, path, ctype string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, b, nil
}

// call sends a JSON body (nil: none) and decodes a 2xx reply into out
// (nil: ignored); any other status is an error naming it.
func (c *apiClient) call(ctx context.Context, method, path string, body any, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	st, reply, err := c.do(ctx, method, path, "application/json", b)
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return &statusError{Method: method, Path: path, Status: st, Body: strings.TrimSpace(string(reply))}
	}
	if out != nil {
		return json.Unmarshal(reply, out)
	}
	return nil
}

// statusError is a reply other than 2xx.
type statusError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Body)
}

// stream sends a find or aggregate with Accept NDJSON and calls each for
// every line of the reply.
func (c *apiClient) stream(ctx context.Context, path string, body any, each func(line []byte) error) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &statusError{Method: http.MethodPost, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(reply))}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("POST %s: reading the reply: %w", path, err)
		}
		if err := each(raw); err != nil {
			return err
		}
	}
}
