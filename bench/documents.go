package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
	"github.com/hourglassdb/hourglass/ttl"
)

// DocConfig shapes the plain-collection benchmark: Docs session documents
// inserted durably in batches of Batch into a collection with Indexes
// secondary indexes (1 to 3: user, device, lastModifiedDate), then Reads
// point reads by _id and by user.
type DocConfig struct {
	Dir                string
	Docs, Batch, Reads int
	Indexes            int
	Progress           func(string)
	documentsPerUser   int
	documentsPerDevice int
}

func (c *DocConfig) ensureDefaults() {
	if c.Docs == 0 {
		c.Docs = 200000
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Reads == 0 {
		c.Reads = 20000
	}
	if c.Indexes == 0 {
		c.Indexes = 1
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	c.documentsPerUser, c.documentsPerDevice = 4, 16
}

// DocResult is what the plain-collection benchmark measured.
type DocResult struct {
	Inserted                   int64
	InsertElapsed              time.Duration
	IDReads, UserReads         int
	IDReadElapsed, UserElapsed time.Duration
	StorageBytes               int64
}

// InsertsPerSecond is the insert rate.
func (r DocResult) InsertsPerSecond() float64 {
	return float64(r.Inserted) / r.InsertElapsed.Seconds()
}

// sessionDoc is a session document as the MongoDB TTL documentation's
// sessions example holds them, with a fixed-size payload.
func sessionDoc(i, perUser, perDevice int, at time.Time) document.Doc {
	return document.Doc{
		"user":             fmt.Sprintf("user-%07d", i/perUser),
		"device":           fmt.Sprintf("device-%06d", i/perDevice),
		"lastModifiedDate": at,
		"ip":               fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
		"cart":             []any{int64(i % 7), int64(i % 11)},
		"agent":            "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0",
	}
}

var sessionIndexes = []timeseries.IndexSpec{
	{Key: []timeseries.IndexKey{{Field: "user", Direction: 1}}},
	{Key: []timeseries.IndexKey{{Field: "device", Direction: 1}}},
	{Key: []timeseries.IndexKey{{Field: "lastModifiedDate", Direction: 1}}},
}

// Documents runs the plain-collection benchmark in cfg.Dir.
func Documents(ctx context.Context, cfg DocConfig) (DocResult, error) {
	cfg.ensureDefaults()
	var res DocResult
	db, err := timeseries.Open(timeseries.Options{Dir: cfg.Dir})
	if err != nil {
		return res, err
	}
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "sessions", timeseries.CollectionOptions{}); err != nil {
		return res, err
	}
	for _, spec := range sessionIndexes[:min(cfg.Indexes, len(sessionIndexes))] {
		if _, _, err := db.CreateIndex(ctx, "sessions", spec); err != nil {
			return res, err
		}
	}
	t0 := time.Now().UTC()
	start := time.Now()
	var ids []any
	batch := make([]document.Doc, 0, cfg.Batch)
	for i := 0; i < cfg.Docs; i += cfg.Batch {
		batch = batch[:0]
		for j := i; j < min(i+cfg.Batch, cfg.Docs); j++ {
			batch = append(batch, sessionDoc(j, cfg.documentsPerUser, cfg.documentsPerDevice, t0))
		}
		r, err := db.Insert(ctx, "sessions", timeseries.Batch{Documents: batch}, timeseries.InsertOptions{})
		if err != nil {
			return res, err
		}
		if len(r.Errors) > 0 {
			return res, fmt.Errorf("insert: %v", r.Errors[0].Err)
		}
		res.Inserted += int64(r.Inserted)
		for _, d := range batch {
			ids = append(ids, d["_id"])
		}
	}
	res.InsertElapsed = time.Since(start)
	cfg.Progress(fmt.Sprintf("%d indexes: inserted %d documents in %v: %.0f documents/s", cfg.Indexes, res.Inserted,
		res.InsertElapsed.Round(time.Millisecond), res.InsertsPerSecond()))

	rng := rand.New(rand.NewPCG(1, 2))
	read := func(filter map[string]any) error {
		f, err := partialfilter.Parse(filter)
		if err != nil {
			return err
		}
		n := 0
		_, err = timeseries.EachDoc(db.Find(ctx, "sessions", timeseries.FindOptions{Filter: f}))(func(document.Doc) error {
			n++
			return nil
		})
		if err == nil && n == 0 {
			err = fmt.Errorf("no document for %v", filter)
		}
		return err
	}
	start = time.Now()
	for i := 0; i < cfg.Reads; i++ {
		if err := read(map[string]any{"_id": ids[rng.IntN(len(ids))]}); err != nil {
			return res, err
		}
	}
	res.IDReads, res.IDReadElapsed = cfg.Reads, time.Since(start)
	start = time.Now()
	for i := 0; i < cfg.Reads; i++ {
		if err := read(map[string]any{"user": fmt.Sprintf("user-%07d", rng.IntN(cfg.Docs/cfg.documentsPerUser))}); err != nil {
			return res, err
		}
	}
	res.UserReads, res.UserElapsed = cfg.Reads, time.Since(start)
	cfg.Progress(fmt.Sprintf("%d indexes: %.0f reads/s by _id, %.0f reads/s by user (%d documents each)", cfg.Indexes,
		float64(res.IDReads)/res.IDReadElapsed.Seconds(), float64(res.UserReads)/res.UserElapsed.Seconds(), cfg.documentsPerUser))
	if res.StorageBytes, err = collectionBytes(ctx, db, "sessions"); err != nil {
		return res, err
	}
	return res, nil
}

// SessionTTLConfig shapes the session-expiry benchmark: Sessions expired
// session documents under a TTL index, deleted by one pass of the TTL
// monitor (MongoDB's budgets) while Writers insert live sessions in
// batches of WriteBatch.
type SessionTTLConfig struct {
	Dir                 string
	Sessions            int
	Writers, WriteBatch int
	Baseline            time.Duration
	Progress            func(string)
}

// SessionTTLResult is what the session-expiry benchmark measured.
type SessionTTLResult struct {
	Loaded                 int64
	LoadElapsed            time.Duration
	Pass                   ttl.PassResult
	PassElapsed            time.Duration
	BaselineP99, SweepP99  time.Duration
	BaselineWrites, Writes int
	DiskBefore, DiskAfter  int64
	LiveAfter              int64 // live sessions left: those the writers inserted
}

// SessionTTL runs the session-expiry benchmark in cfg.Dir.
func SessionTTL(ctx context.Context, cfg SessionTTLConfig) (SessionTTLResult, error) {
	if cfg.Sessions == 0 {
		cfg.Sessions = 1000000
	}
	if cfg.Writers == 0 {
		cfg.Writers = 2
	}
	if cfg.WriteBatch == 0 {
		cfg.WriteBatch = 100
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = 3 * time.Second
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	var res SessionTTLResult
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	db, err := timeseries.Open(timeseries.Options{Dir: cfg.Dir, Now: clock})
	if err != nil {
		return res, err
	}
	defer db.Close()
	if _, err := db.CreateCollection(ctx, "sessions", timeseries.CollectionOptions{}); err != nil {
		return res, err
	}
	e := int64(3600)
	spec := sessionIndexes[2]
	spec.ExpireAfterSeconds = &e
	if _, _, err := db.CreateIndex(ctx, "sessions", spec); err != nil {
		return res, err
	}
	start := time.Now()
	const batchSize = 1000
	batch := make([]document.Doc, 0, batchSize)
	for i := 0; i < cfg.Sessions; i += batchSize {
		batch = batch[:0]
		for j := i; j < min(i+batchSize, cfg.Sessions); j++ {
			// Sessions last modified over the hour before t0.
			at := t0.Add(-time.Hour + time.Duration(j)*time.Hour/time.Duration(cfg.Sessions))
			batch = append(batch, sessionDoc(j, 4, 16, at))
		}
		r, err := db.Insert(ctx, "sessions", timeseries.Batch{Documents: batch}, timeseries.InsertOptions{})
		if err != nil {
			return res, err
		}
		res.Loaded += int64(r.Inserted)
	}
	res.LoadElapsed = time.Since(start)
	cfg.Progress(fmt.Sprintf("loaded %d sessions in %v", res.Loaded, res.LoadElapsed.Round(time.Millisecond)))
	if res.DiskBefore, err = collectionBytes(ctx, db, "sessions"); err != nil {
		return res, err
	}
	// Three hours later every loaded session has expired; live ones are
	// written at that time.
	now.Store(t0.Add(3 * time.Hour).UnixNano())
	var seq atomic.Int64
	newWriter := func(w int) func(n int) error {
		docs := make([]document.Doc, cfg.WriteBatch)
		return func(n int) error {
			for i := range docs {
				docs[i] = sessionDoc(int(seq.Add(1)), 4, 16, clock())
			}
			_, err := db.Insert(ctx, "sessions", timeseries.Batch{Documents: docs}, timeseries.InsertOptions{})
			return err
		}
	}
	samples, err := runWriters(cfg.Writers, newWriter, func(stop <-chan struct{}) error {
		select {
		case <-time.After(cfg.Baseline):
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	if err != nil {
		return res, err
	}
	lat := latencies(samples, time.Time{}, time.Now())
	res.BaselineWrites, res.BaselineP99 = len(lat), summarize(lat).P99
	cfg.Progress(fmt.Sprintf("baseline: %d writes of %d sessions, p99 %v", res.BaselineWrites, cfg.WriteBatch, res.BaselineP99))

	mon, err := ttl.New(ttl.Options{Store: db, Disabled: true, Clock: fixedClock{clock}})
	if err != nil {
		return res, err
	}
	defer mon.Close()
	var passStart time.Time
	samples, err = runWriters(cfg.Writers, newWriter, func(stop <-chan struct{}) error {
		passStart = time.Now()
		pass, err := mon.RunPass(ctx)
		res.PassElapsed, res.Pass = time.Since(passStart), pass
		return err
	})
	if err != nil {
		return res, err
	}
	lat = latencies(samples, passStart, passStart.Add(res.PassElapsed))
	res.Writes, res.SweepP99 = len(lat), summarize(lat).P99
	cfg.Progress(fmt.Sprintf("pass: %d sessions deleted in %v (%d sub-passes); %d writes during it, p99 %v",
		res.Pass.DeletedDocuments, res.PassElapsed.Round(time.Millisecond), res.Pass.SubPasses, res.Writes, res.SweepP99))
	if res.Pass.DeletedDocuments != res.Loaded {
		return res, fmt.Errorf("the pass deleted %d sessions, want %d", res.Pass.DeletedDocuments, res.Loaded)
	}
	info, err := db.Describe(ctx, "sessions")
	if err != nil {
		return res, err
	}
	res.LiveAfter = info.Count
	if res.DiskAfter, err = collectionBytes(ctx, db, "sessions"); err != nil {
		return res, err
	}
	return res, nil
}
