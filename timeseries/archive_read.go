package timeseries

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"time"

	"github.com/hourglassdb/hourglass/archive"
	"github.com/hourglassdb/hourglass/bucket"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/objstore"
	"github.com/hourglassdb/hourglass/partialfilter"
)

// Reads with the archive (FindOptions.Archive, AggregateOptions.Archive;
// docs/archive.md). Before it takes DB.mu, such a read loads from the
// archive the rows in its time range of the series its meta filter
// selects: only the files whose times overlap the range are opened (the
// catalog records each file's bounds), and only the row groups whose
// statistics overlap the range and hold one of the series. Each series'
// archived rows join its buckets in memory in the read's plan
// (seriesSnap.mem), so that finds, sorts, filters and aggregates treat
// them as any other rows; what they hold is charged to the query's
// memory. Archived rows and stored ones never overlap (a pass deletes
// what it archived), and the read shows a series that archives from the
// filter's lower bound, not from its TTL cutoff: what expired and awaits
// the next pass is read from the store, what was moved from the archive.

// archiveView is what a read took from the archive: per series (its
// canonical meta key) its archived rows in range, as time-ordered
// columns, and the types each field holds there.
type archiveView struct {
	byMeta map[string][]*bucket.Columns
	types  map[string]typeSet
	// gen is DB.archiveGen before the files were listed: a snapshot the
	// read takes after another commit would lack rows the view lacks too
	// (archiveView.check).
	gen uint64
}

// check fails a read whose snapshot was taken after an archive commit
// that came after its files were listed: the rows that commit moved are
// in neither. Nil view: a read without the archive.
func (v *archiveView) check(db *DB, c *collection) error {
	if v == nil || db.archiveGen.Load() == v.gen {
		return nil
	}
	return mongoerr.New(mongoerr.QueryPlanKilled, "an archive pass moved data of %q during the read; retry it", c.name)
}

func (v *archiveView) has(metaKey string) bool {
	return v != nil && len(v.byMeta[metaKey]) > 0
}

// visibleFrom is the time from which series s of c is read: its TTL
// cutoff, or for a read with the archive of a series that archives (or
// has archived rows), the beginning of time.
func (p *scanPlan) visibleFrom(c *collection, s *series, now time.Time) int64 {
	if p.archive != nil && (s.archive || p.archive.has(s.metaKey)) {
		return math.MinInt64
	}
	return c.visibleFrom(s, now)
}

// lowerBound is the earliest time p reads of series s of c at now: the
// filter's bound, the visibility cutoff, and the series' own (from).
func (p *scanPlan) lowerBound(c *collection, s *series, now time.Time) int64 {
	lo := max(p.filter.minTime, p.visibleFrom(c, s, now))
	if f, ok := p.from[s.id]; ok {
		lo = max(lo, f)
	}
	return lo
}

// crcTable checksums archive files (ArchiveFile.CRC).
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// loadArchive reads into a view the archived rows of collection c that a
// read with filter and the projection fields (nil: all) needs. DB.mu is
// not held.
func (db *DB) loadArchive(ctx context.Context, c *collection, filter *partialfilter.Filter, fields []string, guard *scanGuard) (*archiveView, error) {
	view := &archiveView{byMeta: map[string][]*bucket.Columns{}, types: map[string]typeSet{}, gen: db.archiveGen.Load()}
	db.mu.RLock()
	ts := c.opts.TimeSeries
	if ts == nil || c.dropped {
		db.mu.RUnlock()
		return view, nil
	}
	var p scanPlan
	p.setup(c, filter, fields, guard)
	var keys map[string]bool // the series the meta filter selects; nil: all
	if !p.filter.empty && p.filter.meta != nil {
		list := c.matchingSeries(&p.filter, ts)
		keys = make(map[string]bool, len(list))
		for _, s := range list {
			keys[s.metaKey] = true
		}
	}
	db.mu.RUnlock()
	if p.filter.empty || (keys != nil && len(keys) == 0) {
		return view, nil
	}
	files, err := db.archivedFiles(ctx, c)
	if err != nil {
		return nil, err
	}
	st := db.opts.Archive
	minT, maxT := p.filter.minTime, p.filter.maxTime
	var want func(string) bool
	if keys != nil {
		want = func(k string) bool { return keys[k] }
	}
	for _, f := range files {
		if f.MaxT < minT || f.MinT > maxT {
			continue
		}
		if st == nil {
			return nil, fmt.Errorf("%w: collection %q has archived files to read", ErrNoArchive, c.name)
		}
		if err := db.readArchiveFile(ctx, st, f, p.fields, minT, maxT, keys, want, guard, view); err != nil {
			return nil, err
		}
	}
	return view, nil
}

// readArchiveFile adds to view the rows of file f that the read needs:
// the file is read whole (charged to the query while it is parsed) and
// checked against its checksum before any of it is parsed.
func (db *DB) readArchiveFile(ctx context.Context, st objstore.Store, f ArchiveFile, fields []string, minT, maxT int64, keys map[string]bool, want func(string) bool, guard *scanGuard, view *archiveView) error {
	if f.Store != "" && f.Store != st.String() {
		return fmt.Errorf("archive: file %s was moved to %s, and this server's archive is %s: start it with --archive-url naming that archive to read it", f.Key, f.Store, st)
	}
	if err := guard.charge(f.Size, "the archived files it reads"); err != nil {
		return err
	}
	defer guard.release(f.Size)
	obj, err := st.Open(ctx, f.Key)
	if errors.Is(err, objstore.ErrNotExist) {
		// Removed from the archive by its operator: what it held is
		// gone, as a delete would have made it.
		db.log.Warn("an archived file recorded in the catalog is missing from the archive: its rows are not read",
			"archive", st.String(), "file", f.Key, "measurements", f.Rows)
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", st, err)
	}
	defer obj.Close()
	if obj.Size() != f.Size {
		return fmt.Errorf("archive %s: file %s holds %d bytes, the catalog recorded %d: it was changed or cut short", st, f.Key, obj.Size(), f.Size)
	}
	data := make([]byte, f.Size)
	if _, err := obj.ReadAt(data, 0); err != nil && err != io.EOF {
		return fmt.Errorf("archive %s: read %s: %w", st, f.Key, err)
	}
	if sum := crc32.Checksum(data, crcTable); f.CRC != 0 && sum != f.CRC {
		return fmt.Errorf("archive %s: file %s is damaged: checksum %08x, the catalog recorded %08x", st, f.Key, sum, f.CRC)
	}
	r, err := archive.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("archive %s: %s: %w", st, f.Key, err)
	}
	for g := 0; g < r.NumRowGroups(); g++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		lo, hi, minMeta, maxMeta, ok := r.Bounds(g)
		if ok && (hi < minT || lo > maxT) {
			continue
		}
		if ok && keys != nil {
			hit := false
			for k := range keys {
				if k >= minMeta && k <= maxMeta {
					hit = true
					break
				}
			}
			if !hit {
				continue
			}
		}
		segs, n, err := r.ReadRowGroup(ctx, g, fields, minT, maxT, want)
		if err != nil {
			return fmt.Errorf("archive %s: %s: %w", st, f.Key, err)
		}
		if err := guard.charge(n, "the archived rows it reads"); err != nil {
			return err
		}
		for i := range segs {
			cols := &segs[i].Cols
			view.byMeta[segs[i].MetaKey] = append(view.byMeta[segs[i].MetaKey], cols)
			for _, fc := range cols.Fields {
				view.types[fc.Name] |= 1 << fc.Type
			}
		}
	}
	return nil
}
