package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
)

// Exchange returns a function that hands this process's entries (one per rank it runs) to every
// other process and returns all entries, indexed by rank: the shape of the exchange hook the
// engines take for connecting queue pairs across processes (QP numbers, GIDs, PSNs, buffer
// addresses and rkeys). size is the number of ranks of the plan; rankOf says which rank an entry
// belongs to. Every rank in 0..size-1 must be contributed by exactly one process.
func Exchange[T any](c *Comm, size int, rankOf func(T) int) func(context.Context, []T) ([]T, error) {
	return func(ctx context.Context, local []T) ([]T, error) {
		parts, err := AllGatherJSON(ctx, c, local)
		if err != nil {
			return nil, err
		}
		all := make([]T, size)
		from := make([]int, size)
		for i := range from {
			from[i] = -1
		}
		for proc, entries := range parts {
			for _, e := range entries {
				r := rankOf(e)
				switch {
				case r < 0 || r >= size:
					return nil, fmt.Errorf("bootstrap: process %d sent an entry for rank %d, outside 0..%d: do all processes run the same plan with the same world size?", proc, r, size-1)
				case from[r] >= 0:
					return nil, fmt.Errorf("bootstrap: rank %d is run by both process %d and process %d: give each process a different rank", r, from[r], proc)
				}
				all[r], from[r] = e, proc
			}
		}
		for r, p := range from {
			if p < 0 {
				return nil, fmt.Errorf("bootstrap: no process runs rank %d of %d: start one process per rank (%d processes joined)", r, size, c.Size())
			}
		}
		return all, nil
	}
}

// AllGatherJSON gives every process every process's v, indexed by process rank, encoded as JSON
// on the wire.
func AllGatherJSON[T any](ctx context.Context, c *Comm, v T) ([]T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: encoding %T: %v", v, err)
	}
	raw, err := c.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	return decodeAll[T](raw)
}

// GatherJSON collects every process's v on rank 0, e.g. each rank's verdict after a run: rank 0
// gets them indexed by process rank, the others get nil.
func GatherJSON[T any](ctx context.Context, c *Comm, v T) ([]T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: encoding %T: %v", v, err)
	}
	raw, err := c.Gather(ctx, b)
	if err != nil || raw == nil {
		return nil, err
	}
	return decodeAll[T](raw)
}

func decodeAll[T any](raw [][]byte) ([]T, error) {
	out := make([]T, len(raw))
	for r, b := range raw {
		if err := json.Unmarshal(b, &out[r]); err != nil {
			return nil, fmt.Errorf("bootstrap: decoding the %T from rank %d: %v (run the same coredag binary on every rank)", out[r], r, err)
		}
	}
	return out, nil
}
