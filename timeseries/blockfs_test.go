package timeseries

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
)

// blockFS is a file system whose creation of sstables (a Pebble flush or
// compaction) waits, while blocked, until it is released: a flush that
// cannot finish, as on a full disk, without filling one.
type blockFS struct {
	vfs.FS
	mu   sync.Mutex
	gate chan struct{} // nil: not blocked
	// waiting receives a value (if nobody waits for it, it is dropped)
	// each time a creation starts to wait.
	waiting chan struct{}
}

func newBlockFS(fs vfs.FS) *blockFS {
	return &blockFS{FS: fs, waiting: make(chan struct{}, 1)}
}

// block makes sstable creations wait until release.
func (fs *blockFS) block() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.gate == nil {
		fs.gate = make(chan struct{})
	}
}

// release lets waiting and later creations go on. It may be called more
// than once.
func (fs *blockFS) release() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.gate != nil {
		close(fs.gate)
		fs.gate = nil
	}
}

func (fs *blockFS) Create(name string) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") {
		fs.mu.Lock()
		g := fs.gate
		fs.mu.Unlock()
		if g != nil {
			select {
			case fs.waiting <- struct{}{}:
			default:
			}
			<-g
		}
	}
	return fs.FS.Create(name)
}
