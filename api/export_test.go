package api

// HoldWriteSlots takes every ingest slot, as requests being decoded and
// stored would, until release is called.
func (s *Server) HoldWriteSlots() (release func()) {
	n := cap(s.writes.slots)
	for range n {
		s.writes.slots <- struct{}{}
	}
	return func() {
		for range n {
			s.writes.release()
		}
	}
}

// WriteSlotsInUse is the number of ingest slots taken.
func (s *Server) WriteSlotsInUse() int { return s.writes.inUse() }

// BodyMemoryInUse is the number of bytes of request bodies held.
func (s *Server) BodyMemoryInUse() int64 { return s.bodies.InUse() }

// OnChunkDecoded sets a function called after each chunk of a JSON insert
// is decoded and converted, before it is stored; nil removes it.
func OnChunkDecoded(f func()) { chunkDecoded = f }
