// Package ttl holds the expiry rules of time-series collections and the
// monitor that deletes expired data.
//
// # Rules
//
// A collection's expireAfterSeconds and each of its partial TTL indexes is
// a Rule. The TTL of a series is the smallest ExpireAfterSeconds among the
// rules whose filter matches its meta value (Rules.Effective). A
// measurement at t has expired at now when now > t + TTL (Expired, Cutoff);
// a bucket when its newest measurement has. A collection holding any
// measurement outside [MinTime, MaxTime] (1970 to 2038) expires nothing.
//
// # Monitor
//
// The Monitor works as MongoDB's TTL monitor: every Sleep it makes a pass
// of sub-passes; a sub-pass lists the rules (Store.Targets) and gives each
// one batch in turn, bounded by TargetDocs and TargetTime, revisiting the
// rules whose batch hit a bound, until nothing expired is left or
// SubPassTarget has passed (then the next sub-pass starts at once).
//
//	m, err := ttl.New(ttl.Options{Store: db, Logger: logger})
//	if err != nil {
//		return err
//	}
//	m.Start()
//	defer m.Close()
//	res, err := m.RunPass(ctx) // an extra pass now, for operators and tests
//
// The package knows no storage: Store is implemented by the time-series
// store, and tests drive the monitor with a fake Store and Clock.
package ttl
