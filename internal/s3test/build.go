package s3test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/mod/modfile"
)

// Module and Version are the SeaweedFS release the tests run: a pseudo-
// version, as SeaweedFS tags no Go module releases.
const (
	Module  = "github.com/seaweedfs/seaweedfs"
	Version = "v0.0.0-20261109003541-7506e5f91cd6"
)

// CacheDir is where Build puts the weed binary: $HOURGLASS_CACHE, else
// hourglass/ in the user's cache directory (~/.cache), so a rebuild of the
// repository or a fresh clone of it does not build SeaweedFS again.
func CacheDir() (string, error) {
	if d := os.Getenv("HOURGLASS_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("s3test: no cache directory (set HOURGLASS_CACHE): %w", err)
	}
	return filepath.Join(d, "hourglass"), nil
}

// Binary is the path Build writes the weed binary to.
func Binary() (string, error) {
	d, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "weed-"+Version, "weed"), nil
}

// Build builds SeaweedFS's weed binary into the cache (Binary) unless it is
// there, and returns its path. It takes minutes on a 2-core machine the
// first time (make deps does it before the tests) and nothing after.
// Concurrent calls, from test binaries running side by side, build once:
// the others wait on a lock file.
//
// SeaweedFS is not in Hourglass's go.mod: it is built from a throwaway
// module that requires it and copies its replace directives (go install
// pkg@version refuses a module that has some), with SeaweedFS's own go.sum,
// so it links the versions its maintainers tested.
func Build() (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	if executable(bin) {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("s3test: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if executable(bin) { // built while this waited for the lock
		return bin, nil
	}
	if err := build(bin); err != nil {
		return "", fmt.Errorf("s3test: building %s@%s: %w", Module, Version, err)
	}
	return bin, nil
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// goCmd runs the go command (or $GO) in dir, without the caller's
// workspace or -mod flags, with a module and build cache under dir, and
// returns its standard output.
func goCmd(dir string, args ...string) ([]byte, error) {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE="+filepath.Join(dir, ".mod"), "GOCACHE="+filepath.Join(dir, ".cache"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", goBin, strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return out, nil
}

// build builds weed in a directory beside bin, with a module and build
// cache of its own that it removes after: SeaweedFS's 400-odd modules and
// their objects (about 4 GB) do not stay in the user's caches for a binary
// that is built once.
func build(bin string) error {
	work, err := os.MkdirTemp(filepath.Dir(bin), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	out, err := goCmd(work, "mod", "download", "-json", Module+"@"+Version)
	if err != nil {
		return err
	}
	var m struct{ Dir, GoMod, Sum, GoModSum, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return fmt.Errorf("go mod download: %w", err)
	}
	if m.Error != "" {
		return errors.New(m.Error)
	}
	theirs, err := os.ReadFile(m.GoMod)
	if err != nil {
		return err
	}
	mf, err := modfile.Parse(m.GoMod, theirs, nil)
	if err != nil {
		return err
	}
	ours := new(modfile.File)
	ours.AddModuleStmt("hourglass.invalid/weedbuild")
	if mf.Go != nil {
		if err := ours.AddGoStmt(mf.Go.Version); err != nil {
			return err
		}
	}
	if err := ours.AddRequire(Module, Version); err != nil {
		return err
	}
	for _, r := range mf.Replace {
		if r.New.Version == "" {
			return fmt.Errorf("go.mod replaces %s with the directory %s, which a build from the module cache cannot follow", r.Old.Path, r.New.Path)
		}
		if err := ours.AddReplace(r.Old.Path, r.Old.Version, r.New.Path, r.New.Version); err != nil {
			return err
		}
	}
	gomod, err := ours.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "go.mod"), gomod, 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(m.Dir, "go.sum"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	sum = fmt.Appendf(sum, "%s %s %s\n%s %s/go.mod %s\n", Module, Version, m.Sum, Module, Version, m.GoModSum)
	if err := os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o644); err != nil {
		return err
	}

	tmp := bin + fmt.Sprintf(".tmp-%d", os.Getpid())
	defer os.Remove(tmp)
	if _, err := goCmd(work, "build", "-trimpath", "-o", tmp, Module+"/weed"); err != nil {
		return err
	}
	return os.Rename(tmp, bin)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
