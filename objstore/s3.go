package objstore

import (
	"context"
	"fmt"
	"net/url"
)

// openS3 opens an s3:// store.
func openS3(ctx context.Context, u *url.URL, o Options) (Store, error) {
	return nil, fmt.Errorf("%w: %s: s3:// stores are not supported by this build yet", ErrBadURL, u.Redacted())
}
