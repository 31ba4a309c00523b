package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// s3Store is a Store in an S3-compatible bucket: a key is an object name
// under prefix. A Put is one PUT of the exact size (or, past minio-go's
// part size, a multipart upload it aborts on error); the server's answer
// is the durability. Reads of an open object are ranged GETs bound to the
// ETag it had when opened, so a replaced object fails the read instead of
// mixing two versions.
type s3Store struct {
	client    *minio.Client
	core      minio.Core // the same client, for GETs that answer at once
	transport *http.Transport
	bucket    string
	prefix    string // "" or ends with "/"
	url       string // s3://bucket/prefix, for messages
}

// awsEndpoint is the endpoint when Options.S3Endpoint is empty; minio-go
// turns it into the regional one.
const awsEndpoint = "s3.amazonaws.com"

// defaultRegion is AWS's own default, and what S3-compatible servers
// (SeaweedFS, MinIO) accept when they are not told of regions.
const defaultRegion = "us-east-1"

// maxTries is how many times a request is sent before its error is
// returned: AWS's SDKs make 3 attempts by default. minio-go's own default of
// 10, with its backoff, keeps a caller waiting about 8 s on a server that
// is gone; the archive and backup callers retry on their own schedule.
const maxTries = 3

// openS3 opens an s3:// store: the bucket must exist.
func openS3(ctx context.Context, u *url.URL, o Options) (Store, error) {
	bucket := u.Host
	if bucket == "" {
		return nil, fmt.Errorf("%w: %q: no bucket (s3://bucket/prefix)", ErrBadURL, u.Redacted())
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %q: an s3 URL is s3://bucket/prefix (credentials come from the environment)", ErrBadURL, u.Redacted())
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := ValidKey(prefix); err != nil {
			return nil, fmt.Errorf("%w: s3://%s/%s: prefix: %v", ErrBadURL, bucket, prefix, err)
		}
		prefix += "/"
	}
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return nil, fmt.Errorf("%w: s3://%s: %v", ErrBadURL, bucket, err)
	}
	name := "s3://" + bucket
	if prefix != "" {
		name += "/" + strings.TrimSuffix(prefix, "/")
	}

	host, secure, lookup := awsEndpoint, true, minio.BucketLookupAuto
	endpoint := "https://" + awsEndpoint
	if o.S3Endpoint != "" {
		e, err := url.Parse(o.S3Endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" ||
			strings.Trim(e.Path, "/") != "" || e.User != nil || e.RawQuery != "" {
			return nil, fmt.Errorf("%w: %s: endpoint %q: want http://host:port or https://host[:port]", ErrBadURL, name, o.S3Endpoint)
		}
		// A custom server is addressed by path (http://host/bucket/key):
		// virtual hosts (bucket.host) need DNS that a test or on-premises
		// server seldom has.
		host, secure, lookup = e.Host, e.Scheme == "https", minio.BucketLookupPath
		endpoint = e.Scheme + "://" + e.Host
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = defaultRegion
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("objstore: %s: %w", name, err)
	}
	client, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"),
			os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")),
		Secure:       secure,
		Transport:    tr,
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   maxTries,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %v", ErrBadURL, name, endpoint, err)
	}
	ok, err := client.BucketExists(ctx, bucket)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("objstore: %s at %s: checking the bucket: %w", name, endpoint, err)
	}
	if !ok {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("%w: %s: bucket %q does not exist at %s", ErrBadURL, name, bucket, endpoint)
	}
	return &s3Store{client: client, core: minio.Core{Client: client}, transport: tr,
		bucket: bucket, prefix: prefix, url: name}, nil
}

func (s *s3Store) String() string { return s.url }

func (s *s3Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

func (s *s3Store) object(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// errorf wraps err with the store's URL, the operation and the key.
func (s *s3Store) errorf(op, key string, err error) error {
	return fmt.Errorf("objstore: %s: %s %s: %w", s.url, op, key, err)
}

// notFound reports whether err is S3's answer for a missing object.
func notFound(err error) bool {
	return minio.ToErrorResponse(err).Code == minio.NoSuchKey
}

func (s *s3Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("objstore: put %s: negative size %d", key, size)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := exactBody(ctx, body, size)
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	_, err = s.client.PutObject(ctx, s.bucket, name, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return s.errorf("put", key, err)
	}
	return nil
}

// s3Object reads an object by ranged GETs under the ETag it was opened
// with, in the context Open was given.
type s3Object struct {
	s    *s3Store
	ctx  context.Context
	key  string
	name string
	etag string
	size int64
}

func (s *s3Store) Open(ctx context.Context, key string) (Object, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, err
	}
	st, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if notFound(err) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotExist, key, s.url)
	}
	if err != nil {
		return nil, s.errorf("open", key, err)
	}
	return &s3Object{s: s, ctx: ctx, key: key, name: name, etag: st.ETag, size: st.Size}, nil
}

func (o *s3Object) Size() int64 { return o.size }

func (o *s3Object) Close() error { return nil }

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("objstore: read %s: negative offset %d", o.key, off)
	}
	if off >= o.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := p
	if rest := o.size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	if len(want) == 0 {
		return 0, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(want))-1); err != nil {
		return 0, fmt.Errorf("objstore: read %s: %w", o.key, err)
	}
	if o.etag != "" {
		if err := opts.SetMatchETag(o.etag); err != nil {
			return 0, fmt.Errorf("objstore: read %s: %w", o.key, err)
		}
	}
	rc, _, _, err := o.s.core.GetObject(o.ctx, o.s.bucket, o.name, opts)
	if err != nil {
		switch code := minio.ToErrorResponse(err).Code; code {
		case minio.NoSuchKey:
			return 0, fmt.Errorf("%w: %s in %s (deleted since it was opened)", ErrNotExist, o.key, o.s.url)
		case "PreconditionFailed":
			return 0, o.s.errorf("read", o.key, errors.New("the object was replaced since it was opened"))
		}
		return 0, o.s.errorf("read", o.key, err)
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, want)
	if err != nil {
		return n, o.s.errorf("read", o.key, err)
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (s *s3Store) Stat(ctx context.Context, key string) (Info, error) {
	name, err := s.object(key)
	if err != nil {
		return Info{}, err
	}
	st, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if notFound(err) {
		return Info{}, fmt.Errorf("%w: %s in %s", ErrNotExist, key, s.url)
	}
	if err != nil {
		return Info{}, s.errorf("stat", key, err)
	}
	return Info{Key: key, Size: st.Size, ModTime: st.LastModified}, nil
}

// List lists the objects under the store's prefix and prefix, which S3
// returns in key order. An object whose key ValidKey refuses (a folder
// marker "dir/" that another tool made) is skipped: no method could use it.
func (s *s3Store) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := ValidKey(prefix[:i]); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx) // ends minio-go's listing goroutine on return
	defer cancel()
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{
		Prefix:    s.prefix + prefix,
		Recursive: true,
	}) {
		if oi.Err != nil {
			return fmt.Errorf("objstore: %s: list %q: %w", s.url, prefix, oi.Err)
		}
		key := strings.TrimPrefix(oi.Key, s.prefix)
		if ValidKey(key) != nil {
			continue
		}
		if err := fn(Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	err = s.client.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{})
	if err != nil && !notFound(err) {
		return s.errorf("delete", key, err)
	}
	return nil
}
