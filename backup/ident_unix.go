//go:build unix

package backup

import (
	"os"
	"strconv"
	"syscall"
)

// identity names a file by device, inode, size and modification time: a
// table hard-linked into two backup images has the same identity, and a
// file written since has another. "" when the file system does not tell.
func identity(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return strconv.FormatUint(uint64(st.Dev), 10) + ":" + strconv.FormatUint(uint64(st.Ino), 10) + ":" +
		strconv.FormatInt(fi.Size(), 10) + ":" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}
