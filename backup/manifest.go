package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hourglassdb/hourglass/objstore"
)

// manifestFormat is the version of the manifest's layout; Restore refuses
// a manifest of a newer one.
const manifestFormat = 1

// Manifest describes a complete backup.
type Manifest struct {
	Format int    `json:"format"`
	ID     string `json:"id"`
	// Taken is when the store's log was cut: every write acknowledged
	// before it is in the backup.
	Taken time.Time `json:"taken"`
	// Finished is when the manifest was written.
	Finished time.Time `json:"finished"`
	// Version is the version of the server that took it ("" if unknown).
	Version string `json:"version,omitempty"`
	// Bytes is the sum of the files' sizes.
	Bytes int64  `json:"bytes"`
	Files []File `json:"files"`
	// Member is the state of the replica set member the backup was taken
	// on, taken with its image while the member applied nothing
	// (timeseries.BackupImage.State): the raft index and term of the last
	// entry the backup holds, the set's configuration, and what the
	// member's state machine keeps besides the engine (package replset,
	// SeedState, in JSON). Absent in a backup of a server that is not a
	// member. Restore ignores it; replset.Seed makes a member of it.
	Member json.RawMessage `json:"member,omitempty"`
}

// File is a file of a backup.
type File struct {
	// Path is where the file goes in a data directory ("store/000012.sst").
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Key is the object holding it (fileKey).
	Key string `json:"key"`
	// Ident is the local file's identity when it was backed up (device,
	// inode, size, modification time; "" if unknown): the next backup of
	// the same store takes the checksum of a file with the same path and
	// identity from here instead of reading the file again.
	Ident string `json:"ident,omitempty"`
}

// Keys of a target.
const (
	backupsPrefix = "backups/"
	filesPrefix   = "files/"
	manifestName  = "manifest"
	pendingName   = "pending"
)

func manifestKey(id string) string { return backupsPrefix + id + "/" + manifestName }
func pendingKey(id string) string  { return backupsPrefix + id + "/" + pendingName }

// fileKey is the key of a file: its name, size and checksum, so that the
// same file in two backups is one object and a changed file is another.
func fileKey(path string, size int64, sum string) string {
	name := path[strings.LastIndexByte(path, '/')+1:]
	return filesPrefix + name + "." + strconv.FormatInt(size, 10) + "." + sum
}

// idPattern is what a backup's ID looks like: the UTC time it started, to
// the millisecond, and four random hex digits. IDs sort in time order.
var idPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{4}$`)

// ValidID reports whether id has the form of a backup's ID.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func newID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

// SplitURL splits "<target>/<id>" into the target's URL and the ID; a URL
// whose last segment is not an ID is the target, with id "".
func SplitURL(rawURL string) (target, id string) {
	s := strings.TrimRight(rawURL, "/")
	i := strings.LastIndexByte(s, '/')
	if i >= 0 && ValidID(s[i+1:]) {
		return s[:i], s[i+1:]
	}
	return rawURL, ""
}

// encodeManifest is the manifest's JSON, then a line "sha256 <hex>" of the
// JSON's checksum: a manifest cut short or changed does not verify.
func encodeManifest(m *Manifest) ([]byte, error) {
	j, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(j)
	j = append(j, "\nsha256 "...)
	j = append(j, hex.EncodeToString(sum[:])...)
	return append(j, '\n'), nil
}

// decodeManifest checks and decodes what encodeManifest wrote; problems
// are a *DamagedError.
func decodeManifest(id string, b []byte) (*Manifest, error) {
	damaged := func(format string, args ...any) error {
		return &DamagedError{ID: id, Problems: []string{fmt.Sprintf(format, args...)}}
	}
	body, trailer, ok := bytes.Cut(b, []byte("\nsha256 "))
	if !ok || len(trailer) != 2*sha256.Size+1 || trailer[len(trailer)-1] != '\n' {
		return nil, damaged("its manifest (%d bytes) has no checksum line: cut short or not a manifest", len(b))
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != string(trailer[:len(trailer)-1]) {
		return nil, damaged("its manifest does not match its checksum")
	}
	var m Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, damaged("its manifest does not decode: %v", err)
	}
	if m.Format > manifestFormat {
		return nil, fmt.Errorf("backup %s: its manifest is of format %d, newer than this version reads (%d): restore it with a newer hourglass", id, m.Format, manifestFormat)
	}
	if m.ID != id {
		return nil, damaged("its manifest names backup %q", m.ID)
	}
	var total int64
	for _, f := range m.Files {
		if f.Key != fileKey(f.Path, f.Size, f.SHA256) || !validPath(f.Path) {
			return nil, damaged("its manifest lists a file it cannot have: %q in %q", f.Path, f.Key)
		}
		total += f.Size
	}
	if total != m.Bytes || len(m.Files) == 0 {
		return nil, damaged("its manifest lists %d files of %d bytes, but says %d bytes", len(m.Files), total, m.Bytes)
	}
	return &m, nil
}

// validPath reports whether p is a path Restore may write: a file in
// store/ or wal/.
func validPath(p string) bool {
	dir, name, ok := strings.Cut(p, "/")
	return ok && (dir == "store" || dir == "wal") && name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/\\\x00")
}

// readManifest reads and checks the manifest of backup id.
func readManifest(ctx context.Context, st objstore.Store, id string) (*Manifest, error) {
	b, err := readObject(ctx, st, manifestKey(id), 64<<20)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("%w %s in %s", ErrNoBackup, id, st)
	}
	if err != nil {
		return nil, err
	}
	return decodeManifest(id, b)
}

// readObject reads a whole object of at most max bytes.
func readObject(ctx context.Context, st objstore.Store, key string, max int64) ([]byte, error) {
	o, err := st.Open(ctx, key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: read %s from %s: %v", ErrTarget, key, st, err)
	}
	defer o.Close()
	if o.Size() > max {
		return nil, fmt.Errorf("%w: %s in %s holds %d bytes, more than the %d expected", ErrDamaged, key, st, o.Size(), max)
	}
	b, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s from %s: %v", ErrTarget, key, st, err)
	}
	return b, nil
}
