package exec

import (
	"testing"

	"github.com/coredag/coredag/ir"
)

// TestRecvProducer: a stuck receive is blamed on the send that matches it and on that send's
// rank; one that nothing matches, on its queue's peer.
func TestRecvProducer(t *testing.T) {
	g := newBuild("recvs", 2).forEach(func(rb *rankB) {
		rb.queue("q", 1-rb.r, "")
		rb.op("rx", opSpec{Kind: ir.OpRecv, Q: "q"})
		if rb.r == 0 {
			rb.op("tx", opSpec{Kind: ir.OpSend, Q: "q"})
			rb.op("extra", opSpec{Kind: ir.OpRecv, Q: "q"})
		}
	}).done()
	find := func(rank int32, name string) ir.OpID {
		for i := range g.Ops {
			if g.Ops[i].Rank == rank && g.Ops[i].Name == name {
				return ir.OpID(i)
			}
		}
		t.Fatalf("no op %s on rank %d", name, rank)
		return ir.None
	}
	tests := []struct {
		rank int32
		name string
		want string
		op   ir.OpID
	}{
		{1, "rx", "tx on rank 0 (recvs.dag:3:1): rank 1 waits for rank 0", find(0, "tx")},
		{0, "extra", "a send on rank 1, which no op matches: rank 0 waits for rank 1", ir.None},
	}
	for _, tt := range tests {
		got, op := recvProducer(g, find(tt.rank, tt.name))
		if got != tt.want || op != tt.op {
			t.Errorf("recvProducer(%s on rank %d) = %q, %d; want %q, %d", tt.name, tt.rank, got, op, tt.want, tt.op)
		}
	}
}
