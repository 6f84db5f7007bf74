package prove

// Size is how large the proof's state grew: shapes made and runs of memory at the end.
func (s *State) Size() (shapes, runs int) {
	for i := range s.mem.bufs {
		runs += s.mem.bufs[i].len()
	}
	return len(s.sh.list), runs
}

// Moves is how many writes the proof made to memory and how many segments they moved.
func (s *State) Moves() (puts, moved int) { return s.mem.puts, s.mem.moved }

// Terms is how many terms the table of shapes held at most, and holds at the end.
func (s *State) Terms() (peak, end int) { return s.peak, len(s.sh.terms) }

// Stopped reports whether the replay was stopped by its context.
func (s *State) Stopped() bool { return s.stopped }
