package randgraph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
)

func TestDeterministic(t *testing.T) {
	t.Parallel()
	a, b := New(42, Config{}), New(42, Config{})
	require.Equal(t, len(a.Ops), len(b.Ops))
	for i := range a.Ops {
		assert.Equal(t, a.Ops[i].Name, b.Ops[i].Name)
		assert.Equal(t, a.Ops[i].Src, b.Ops[i].Src)
	}
	assert.Equal(t, a.Edges, b.Edges)
}

func TestGraphsAreWellFormed(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 500; seed++ {
		g := New(seed, Config{})
		require.GreaterOrEqual(t, g.Ranks, 2, "seed %d", seed)
		require.Len(t, g.Rank, g.Ranks, "seed %d", seed)
		for qi := range g.Queues {
			q := &g.Queues[qi]
			p := &g.Queues[q.Peer]
			require.Equal(t, ir.QueueID(qi), p.Peer, "seed %d: pairing not mutual", seed)
			require.Equal(t, q.Rank, p.PeerRank, "seed %d", seed)
			for k, id := range q.SendOps {
				assert.Equal(t, k, int(g.Ops[id].Index))
			}
			for k, id := range q.RecvOps {
				op := &g.Ops[id]
				assert.Equal(t, k, int(op.Index))
				require.NotEqual(t, ir.OpID(ir.None), op.Match, "seed %d: recv %s unmatched", seed, op.Name)
				s := &g.Ops[op.Match]
				assert.Equal(t, id, s.Match)
				if s.Kind == ir.OpSend {
					assert.Equal(t, g.Bytes(s.Src), g.Bytes(op.Dst), "seed %d: %s and %s lengths differ", seed, s.Name, op.Name)
				} else {
					assert.False(t, op.Dst.Valid(), "seed %d: a recv for a notify write has no slice", seed)
				}
			}
		}
		for _, e := range g.Edges {
			assert.Equal(t, g.Ops[e.From].Rank, g.Ops[e.To].Rank, "seed %d: edge across ranks", seed)
		}
		for r, span := range g.Rank {
			for id := span.FirstOp; id < span.EndOp; id++ {
				assert.Equal(t, r, int(g.Ops[id].Rank))
			}
		}
		assert.Empty(t, verify.Check(t.Context(), g), "seed %d: the verifier objects", seed)
	}
}

// Every region written is written by one op only: the race-freedom argument of the package doc.
func TestWritesAreDisjoint(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		g := New(seed, Config{})
		type key struct {
			rank int
			off  int64
		}
		owner := map[key]string{}
		claim := func(rank int, s ir.Slice, who string) {
			if !s.Valid() {
				return
			}
			for i := s.Off; i < s.Off+s.Len; i++ {
				k := key{rank, i}
				if prev, ok := owner[k]; ok {
					t.Fatalf("seed %d: element %d on rank %d written by %s and %s", seed, i, rank, prev, who)
				}
				owner[k] = who
			}
		}
		for i := range g.Ops {
			op := &g.Ops[i]
			peer := -1
			if op.Queue != ir.None {
				peer = g.Queues[op.Queue].PeerRank
			}
			switch op.Kind {
			case ir.OpRecv, ir.OpRead, ir.OpReduce, ir.OpCopy:
				claim(int(op.Rank), op.Dst, op.Name)
			case ir.OpWrite:
				claim(peer, op.Dst, op.Name)
			case ir.OpAtomicAdd, ir.OpAtomicCAS:
				claim(peer, op.Dst, op.Name)
				claim(int(op.Rank), op.Fetch(), op.Name)
			}
		}
	}
}
