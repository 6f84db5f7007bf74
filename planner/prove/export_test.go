package prove

// Size is how large the proof's state grew: shapes interned and runs of memory at the end.
func (s *State) Size() (shapes, runs int) {
	for _, l := range s.mem.bufs {
		runs += len(l)
	}
	return len(s.sh.list), runs
}
