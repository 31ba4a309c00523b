package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hourglassdb/hourglass/backup"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/replset"
)

// backupVerbs are the verbs of "hourglass backup".
var backupVerbs = []struct{ name, summary string }{
	{"create", "ask a running server to take a backup (POST /v1/admin/backup)"},
	{"list", "list the backups in a target, newest last"},
	{"verify", "check a backup's files against its manifest (the newest when no ID)"},
	{"prune", "keep the newest --keep backups, remove the others and the files only they use"},
}

func backupUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: hourglass backup <verb> [flags]

Online backups of a server's data into a directory (file:///dir) or an S3
bucket (s3://bucket/prefix); docs/backup.md is the guide. Restore one with
"hourglass restore".

Verbs:
`)
	for _, v := range backupVerbs {
		fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
	}
	fmt.Fprintf(w, `
Run "hourglass backup <verb> --help" for a verb's flags.
`)
}

func runBackup(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		backupUsage(stderr)
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		backupUsage(stdout)
		return nil
	case "create":
		return runBackupCreate(args[1:], stdout, stderr)
	case "list":
		return runBackupList(args[1:], stdout, stderr)
	case "verify":
		return runBackupVerify(args[1:], stdout, stderr)
	case "prune":
		return runBackupPrune(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown verb %q\n\n", args[0])
	backupUsage(stderr)
	return errUsage
}

// targetFlags are the flags naming a target.
type targetFlags struct {
	from       string
	s3Endpoint string
}

func (t *targetFlags) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&t.from, "from", "", what)
	fs.StringVar(&t.s3Endpoint, "s3-endpoint", "", "`URL` of an S3-compatible server (http://127.0.0.1:8333); empty: AWS, with the AWS_* environment")
}

// open opens the target of --from and returns the backup ID it names, if
// any ("<url>/<id>").
func (t *targetFlags) open(ctx context.Context) (objstore.Store, string, error) {
	if t.from == "" {
		return nil, "", fmt.Errorf("--from is required: the backups' target, file:///dir or s3://bucket/prefix")
	}
	target, id := backup.SplitURL(t.from)
	// Opening a directory target creates it: a target to read must exist.
	if u, err := url.Parse(target); err == nil && u.Scheme == "file" && u.Path != "" {
		if _, err := os.Stat(u.Path); err != nil {
			return nil, "", fmt.Errorf("backup target %s: %w", target, err)
		}
	}
	st, err := objstore.Open(ctx, target, objstore.Options{S3Endpoint: t.s3Endpoint})
	if err != nil {
		return nil, "", err
	}
	return st, id, nil
}

// with opens the target of --from under a context that a signal ends,
// runs fn with it and the backup ID --from names, and closes it.
func (t *targetFlags) with(fn func(ctx context.Context, st objstore.Store, id string) error) error {
	ctx, cancel := signalContext()
	defer cancel()
	st, id, err := t.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(ctx, st, id)
}

// verbFlags makes a verb's flag set with its usage text.
func verbFlags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+"\nFlags:\n")
		printFlags(fs.Output(), fs)
	}
	return fs
}

// signalContext is canceled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runBackupCreate(args []string, stdout, stderr io.Writer) error {
	var server, to, token string
	var rate int64
	fs := verbFlags("backup create", `Usage: hourglass backup create --to URL [--server URL] [--auth-token T]

Asks the server at --server to take an online backup into --to and waits
for it: the server keeps serving, and every write it acknowledged before
the call is in the backup. Prints the backup's ID, files and bytes (and
how many bytes it copied: files the target held already are not copied).
`)
	fs.StringVar(&server, "server", "http://127.0.0.1:7700", "the server's HTTP `URL`")
	fs.StringVar(&to, "to", "", "the backups' target `URL`: file:///dir (a directory on the server's machine) or s3://bucket/prefix")
	fs.StringVar(&token, "auth-token", "", "the server's bearer `token`, if it has one")
	fs.Int64Var(&rate, "max-bytes-per-second", 0, "pace the server's reads of its files to `n` bytes a second on average, leaving the disk to writers; 0: no limit")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if to == "" {
		return fmt.Errorf("--to is required: the backups' target, file:///dir or s3://bucket/prefix")
	}
	body, _ := json.Marshal(map[string]any{"to": to, "maxBytesPerSecond": rate})
	ctx, cancel := signalContext()
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+"/v1/admin/backup", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	var r struct {
		Backup      string `json:"backup"`
		Files       int    `json:"files"`
		Bytes       int64  `json:"bytes"`
		CopiedBytes int64  `json:"copiedBytes"`
		TookMillis  int64  `json:"tookMillis"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("the server's reply %q: %v", b, err)
	}
	fmt.Fprintf(stdout, "backup %s: %d files, %d bytes, %d copied, in %v\n", r.Backup, r.Files, r.Bytes, r.CopiedBytes,
		time.Duration(r.TookMillis)*time.Millisecond)
	return nil
}

func runBackupList(args []string, stdout, stderr io.Writer) error {
	var t targetFlags
	fs := verbFlags("backup list", `Usage: hourglass backup list --from URL

Lists the backups in a target, oldest first: complete ones with when they
were taken, their files and bytes; incomplete ones (interrupted, or being
taken) as such: they are never restored.
`)
	t.register(fs, "the backups' target `URL`: file:///dir or s3://bucket/prefix")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	return t.with(func(ctx context.Context, st objstore.Store, _ string) error {
		list, err := backup.List(ctx, st)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tTAKEN\tFILES\tBYTES")
		for _, b := range list {
			switch {
			case !b.Complete:
				fmt.Fprintf(tw, "%s\tincomplete\t-\t-\t-\n", b.ID)
			case b.Err != nil:
				fmt.Fprintf(tw, "%s\tdamaged: %v\t-\t-\t-\n", b.ID, b.Err)
			default:
				fmt.Fprintf(tw, "%s\tcomplete\t%s\t%d\t%d\n", b.ID, b.Manifest.Taken.Format(time.RFC3339), len(b.Manifest.Files), b.Manifest.Bytes)
			}
		}
		return tw.Flush()
	})
}

func runBackupVerify(args []string, stdout, stderr io.Writer) error {
	var t targetFlags
	fs := verbFlags("backup verify", `Usage: hourglass backup verify --from URL[/ID]

Reads every file of a backup (the newest complete one, or the one whose ID
ends --from) and checks its size and SHA-256 against the manifest, and the
manifest against its own checksum. Exits 1 naming every missing or damaged
file; such a backup is not restored.
`)
	t.register(fs, "the backups' target `URL`, or a backup's: <target>/<id>")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	return t.with(func(ctx context.Context, st objstore.Store, id string) error {
		m, err := backup.Verify(ctx, st, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "backup %s is complete and intact: %d files, %d bytes, taken %s\n", m.ID, len(m.Files), m.Bytes, m.Taken.Format(time.RFC3339))
		return nil
	})
}

func runBackupPrune(args []string, stdout, stderr io.Writer) error {
	var t targetFlags
	var keep int
	fs := verbFlags("backup prune", `Usage: hourglass backup prune --from URL --keep N

Keeps the N newest complete backups of a target and removes the older ones,
then the files no kept backup uses. Incomplete backups older than a day are
removed too; while a younger one exists (a backup may be under way) no file
is removed.
`)
	t.register(fs, "the backups' target `URL`: file:///dir or s3://bucket/prefix")
	fs.IntVar(&keep, "keep", 0, "the number of newest complete backups to keep (`n` >= 1)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if keep < 1 {
		return fmt.Errorf("--keep is required, at least 1: the number of newest backups to keep")
	}
	return t.with(func(ctx context.Context, st objstore.Store, _ string) error {
		res, err := backup.Prune(ctx, st, keep, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "kept %d backups, removed %d; removed %d files (%d bytes)\n", len(res.Kept), len(res.Removed), res.Files, res.Bytes)
		for _, id := range res.Removed {
			fmt.Fprintf(stdout, "removed %s\n", id)
		}
		if res.FilesSkipped {
			fmt.Fprintln(stdout, "no file removed: an incomplete backup less than a day old may be under way")
		}
		return nil
	})
}

func runRestore(args []string, stdout, stderr io.Writer) error {
	var t targetFlags
	var dataDir, logFormat, logLevel string
	var member bool
	fs := verbFlags("restore", `Usage: hourglass restore --from URL[/ID] --data-dir DIR [--member]

Restores a backup (the newest complete one in the target, or the one whose
ID ends --from) into DIR, which must not exist or be empty. Every file is
checked against the backup's manifest as it arrives, and the store is
opened once (its log replayed) before it appears at DIR: a damaged or
incomplete backup is refused and leaves no DIR. Then:

  hourglass serve --data-dir DIR

With --member, a backup taken on a replica set member becomes a new
member's data directory, holding the backup's data at the raft index the
backup recorded; it joins the set and receives the log after that index
(docs/replication.md):

  hourglass serve --replica-set NAME --node-id ID --raft-listen HOST:PORT \
    --join MEMBER-HTTP-ADDRESS --listen HOST:PORT --data-dir DIR
`)
	t.register(fs, "the backups' target `URL`, or a backup's: <target>/<id>")
	fs.StringVar(&dataDir, "data-dir", "", "the new data `directory`")
	fs.BoolVar(&member, "member", false, "make DIR a new replica set member's directory, seeded from a backup taken on a member: it joins with serve --join and catches up from the log after the backup's raft index")
	fs.StringVar(&logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if dataDir == "" {
		return fmt.Errorf("--data-dir is required: the directory to restore into")
	}
	log, err := newLogger(stderr, logFormat, logLevel)
	if err != nil {
		return err
	}
	return t.with(func(ctx context.Context, st objstore.Store, id string) error {
		if member {
			return restoreMember(ctx, st, id, dataDir, log, stdout)
		}
		m, err := backup.Restore(ctx, st, id, dataDir, backup.Options{Logger: log})
		if err != nil {
			if errors.Is(err, backup.ErrDamaged) {
				return fmt.Errorf("%w; nothing was written to %s", err, dataDir)
			}
			return err
		}
		fmt.Fprintf(stdout, "restored backup %s (taken %s: %d files, %d bytes) into %s\nstart it with: hourglass serve --data-dir %s\n",
			m.ID, m.Taken.Format(time.RFC3339), len(m.Files), m.Bytes, dataDir, dataDir)
		if info, err := replset.ParseSeed(m.Member); err == nil {
			fmt.Fprintf(stdout, "(taken on replica set member %s at raft index %d: restore it with --member to seed a new member)\n", info.Member, info.Index)
		}
		return nil
	})
}

// restoreMember restores backup id of st as a new replica set member's
// data directory (replset.Seed): the engine in DIR/engine, a snapshot of
// it at the backup's raft index, the raft state. It is built beside DIR
// and renamed into place once whole; a backup of a server that is not a
// member is refused before anything is written.
func restoreMember(ctx context.Context, st objstore.Store, id, dataDir string, log *slog.Logger, stdout io.Writer) error {
	dataDir = filepath.Clean(dataDir)
	m, err := backup.ReadManifest(ctx, st, id)
	if err != nil {
		return err
	}
	if _, err := replset.ParseSeed(m.Member); err != nil {
		return fmt.Errorf("backup %s cannot seed a replica set member: %w; restore it without --member to serve it on its own, or start a new member on an empty --data-dir to be sent a snapshot", m.ID, err)
	}
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%w: %s is not empty: restore into a new directory", backup.ErrDataDir, dataDir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", backup.ErrDataDir, err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := dataDir + ".seed-" + hex.EncodeToString(rnd[:])
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	if _, err := backup.Restore(ctx, st, m.ID, filepath.Join(tmp, "engine"), backup.Options{Logger: log}); err != nil {
		if errors.Is(err, backup.ErrDamaged) {
			return fmt.Errorf("%w; nothing was written to %s", err, dataDir)
		}
		return err
	}
	info, err := replset.Seed(tmp, m.Member, log)
	if err != nil {
		return err
	}
	if err := os.Remove(dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", backup.ErrDataDir, err)
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return fmt.Errorf("%w: %v", backup.ErrDataDir, err)
	}
	done = true
	if d, err := os.Open(filepath.Dir(dataDir)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "restored backup %s (taken %s on replica set member %s, raft index %d, term %d: %d files, %d bytes) into %s as a new member's directory\n"+
		"join the set with: hourglass serve --replica-set NAME --node-id ID --raft-listen HOST:PORT --join MEMBER-HTTP-ADDRESS --listen HOST:PORT --data-dir %s\n",
		m.ID, m.Taken.Format(time.RFC3339), info.Member, info.Index, info.Term, len(m.Files), m.Bytes, dataDir, dataDir)
	return nil
}
