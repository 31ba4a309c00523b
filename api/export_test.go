package api

import (
	"context"
	"strings"

	"github.com/hourglassdb/hourglass/command"
	"github.com/hourglassdb/hourglass/model"
)

// HoldWriteSlots takes every ingest slot, as requests being decoded and
// stored would, until release is called.
func (s *Server) HoldWriteSlots() (release func()) {
	in := s.cmd.Ingest()
	n := in.Slots()
	for range n {
		if err := in.Acquire(context.Background()); err != nil {
			panic(err)
		}
	}
	return func() {
		for range n {
			in.Release()
		}
	}
}

// WriteSlotsInUse is the number of ingest slots taken.
func (s *Server) WriteSlotsInUse() int { return s.cmd.Ingest().InUse() }

// BodyMemoryInUse is the number of bytes of request bodies held.
func (s *Server) BodyMemoryInUse() int64 { return s.cmd.Bodies().InUse() }

// OnChunkDecoded sets a function called after each chunk of a JSON insert
// (or a remote write) is decoded and converted, before it is stored; nil
// removes it.
func OnChunkDecoded(f func()) { chunkDecoded = f }

// OpDoors returns the door of each operation in progress on collection.
func (s *Server) OpDoors(collection string) []command.Door {
	var doors []command.Door
	for _, o := range s.cmd.Ops().List() {
		if o.Collection == collection {
			doors = append(doors, o.Door)
		}
	}
	return doors
}

// HoldBodyMemory takes n bytes of the body memory, as bodies being read
// would, until release is called.
func (s *Server) HoldBodyMemory(n int64) (release func()) {
	b := s.cmd.Bodies()
	if !b.TryTake(n) {
		panic("api: body memory in use")
	}
	return func() { b.Give(n) }
}

// BodyMemoryFree is the body memory no request holds.
func (s *Server) BodyMemoryFree() int64 { return s.cmd.Bodies().Max() - s.cmd.Bodies().InUse() }

// OnPromQuery sets a function called by each PromQL request (query,
// series, labels) once currentop lists it, before it reads; set it before
// the server serves the requests it is for.
func (s *Server) OnPromQuery(f func()) { s.promStarted = f }

// PromKeySlots returns the series slots of the remote-write key cache's
// entries whose encoded labels contain sub.
func PromKeySlots(sub string) []*model.SeriesSlot {
	var found []*model.SeriesSlot
	promKeys.mu.RLock()
	defer promKeys.mu.RUnlock()
	for _, g := range []*promKeyGen{promKeys.cur, promKeys.prev} {
		for _, e := range g.entries {
			if strings.Contains(e.wire, sub) {
				found = append(found, e.slot)
			}
		}
	}
	return found
}
