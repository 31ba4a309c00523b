// Package objstore is where Hourglass puts files that leave the store:
// archived data (docs/archive.md) and backups (docs/backup.md). A Store is
// a directory (file://) or an S3-compatible bucket (s3://), named by a URL.
//
// Keys are slash-separated relative paths ("sensors/date=2026-01-02/x.parquet"):
// no leading slash, no empty, "." or ".." segment (ValidKey). A Put is
// durable when it returns: the file and its directory are synced, or the
// object store acknowledged the PUT. Objects are written whole: a reader
// sees the old object, the new one, or none, never part of one.
//
// Usage:
//
//	st, err := objstore.Open(ctx, "file:///var/lib/hourglass/archive", objstore.Options{})
//	if err != nil { ... }
//	defer st.Close()
//	err = st.Put(ctx, "sensors/date=2026-01-02/0001.parquet", bytes.NewReader(b), int64(len(b)))
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// Errors.
var (
	// ErrNotExist is returned (wrapped) for a key that holds no object.
	ErrNotExist = errors.New("objstore: object does not exist")
	// ErrBadKey is returned (wrapped) for a key ValidKey refuses.
	ErrBadKey = errors.New("objstore: bad key")
	// ErrBadURL is returned (wrapped) by Open for a URL it cannot use.
	ErrBadURL = errors.New("objstore: bad URL")
)

// Store holds objects under keys. Its methods are safe for concurrent use.
type Store interface {
	// Put writes size bytes from body under key, replacing any object
	// there, and returns once the object is durable. On error no object,
	// or the old one, is under key: a body that holds fewer or more than
	// size bytes is an error. A Put that ends with ctx while a Read of a
	// body that cannot seek is blocked leaves that Read to return later.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// Open opens the object under key for random access (Parquet readers
	// read its footer first). The caller closes it. The object's reads
	// run under ctx (an S3 object is read by ranged GETs): keep it alive
	// while reading. An object replaced after Open reads as the old one
	// or fails, never as a mix of both.
	Open(ctx context.Context, key string) (Object, error)
	// Stat describes the object under key (ErrNotExist if none).
	Stat(ctx context.Context, key string) (Info, error)
	// List calls fn for every object whose key starts with prefix, in
	// key order. An error from fn stops it and is returned.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Delete removes the object under key; no object is not an error.
	Delete(ctx context.Context, key string) error
	// String is the store's URL, for messages (no credentials).
	String() string
	// Close releases the store. Close twice is harmless.
	Close() error
}

// Object is an open object: random reads and its size.
type Object interface {
	io.ReaderAt
	Size() int64
	io.Closer
}

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Options configure Open. The zero value serves file:// URLs and s3:// URLs
// with the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION).
type Options struct {
	// S3Endpoint is the S3 server's URL (http://127.0.0.1:8333) for an
	// S3-compatible store; empty means AWS.
	S3Endpoint string
}

// ValidKey reports whether key is usable: slash-separated, relative, no
// empty, "." or ".." segment, no NUL or backslash.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrBadKey)
	}
	if strings.ContainsAny(key, "\x00\\") {
		return fmt.Errorf("%w: %q holds a NUL or a backslash", ErrBadKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q has an empty, \".\" or \"..\" segment", ErrBadKey, key)
		}
	}
	return nil
}

// Open opens the store named by rawURL: file:///abs/dir (a directory,
// created if missing) or s3://bucket/prefix (the bucket must exist).
func Open(ctx context.Context, rawURL string, o Options) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadURL, rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: a file URL names a local path (file:///dir)", ErrBadURL, rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("%w: %q: no path", ErrBadURL, rawURL)
		}
		return openDir(u.Path)
	case "s3":
		return openS3(ctx, u, o)
	default:
		return nil, fmt.Errorf("%w: %q: the scheme must be file or s3", ErrBadURL, rawURL)
	}
}
