package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hourglassdb/hourglass/internal/s3test"
)

// serve refuses to start on an --archive-url it cannot use: one that does
// not parse, a scheme it does not serve, an S3 bucket that does not exist
// on a real S3 server, or an archive on a replica set member.
func TestServeRefusesBadArchive(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--archive-url", "ftp://host/x"}, "the scheme must be file or s3"},
		{[]string{"--archive-url", "file://"}, "no path"},
		{[]string{"--archive-url", "s3://no-such-bucket/x", "--archive-s3-endpoint", srv.Endpoint}, "no-such-bucket"},
		{[]string{"--archive-url", "file:///tmp/x", "--replica-set", "rs", "--node-id", "a", "--raft-listen", "127.0.0.1:17701",
			"--members", "a=127.0.0.1:17701/127.0.0.1:17702"}, "replica set"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--mongo-listen", "", "--data-dir", t.TempDir()}, c.args...)
		if code := run(args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, errOut.String())
		}
	}
}
