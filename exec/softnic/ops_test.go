package softnic

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

const allAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}

// TestOpcodes runs every data opcode once between two ranks and checks memory and completions.
func TestOpcodes(t *testing.T) {
	type result struct {
		sendWC nic.WC
		recvWC *nic.WC // nil: no receive completion expected
	}
	tests := []struct {
		name  string
		setup func(a, b *end) nic.SendWR // posts receives if needed, returns the request
		check func(t *testing.T, a, b *end)
		want  result
	}{
		{
			name: "send",
			setup: func(a, b *end) nic.SendWR {
				fill(a.mr.Bytes()[:100], 1)
				postRecv(t, b, nic.RecvWR{ID: 7, Local: b.sge(1000, 200)})
				return nic.SendWR{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 100)}
			},
			check: func(t *testing.T, a, b *end) { assert.Equal(t, a.mr.Bytes()[:100], b.mr.Bytes()[1000:1100]) },
			want: result{nic.WC{ID: 1, Opcode: nic.OpSend, ByteLen: 100},
				&nic.WC{ID: 7, Opcode: nic.OpRecv, ByteLen: 100}},
		},
		{
			name: "send inline reads the buffer at post time",
			setup: func(a, b *end) nic.SendWR {
				fill(a.mr.Bytes()[:16], 5)
				postRecv(t, b, nic.RecvWR{ID: 8, Local: b.sge(0, 16)})
				return nic.SendWR{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled | nic.FlagInline, Local: nic.SGE{Addr: a.mr.Addr(), Len: 16}}
			},
			check: func(t *testing.T, a, b *end) {
				want := make([]byte, 16)
				fill(want, 5)
				assert.Equal(t, want, b.mr.Bytes()[:16])
			},
			want: result{nic.WC{ID: 2, Opcode: nic.OpSend, ByteLen: 16}, &nic.WC{ID: 8, Opcode: nic.OpRecv, ByteLen: 16}},
		},
		{
			name: "empty send",
			setup: func(a, b *end) nic.SendWR {
				postRecv(t, b, nic.RecvWR{ID: 9})
				return nic.SendWR{ID: 3, Op: nic.OpSend, Flags: nic.FlagSignaled}
			},
			want: result{nic.WC{ID: 3, Opcode: nic.OpSend}, &nic.WC{ID: 9, Opcode: nic.OpRecv}},
		},
		{
			name: "write",
			setup: func(a, b *end) nic.SendWR {
				fill(a.mr.Bytes()[64:128], 9)
				addr, key := b.remote(512)
				return nic.SendWR{ID: 4, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(64, 64), RemoteAddr: addr, RKey: key}
			},
			check: func(t *testing.T, a, b *end) { assert.Equal(t, a.mr.Bytes()[64:128], b.mr.Bytes()[512:576]) },
			want:  result{nic.WC{ID: 4, Opcode: nic.OpRDMAWrite, ByteLen: 64}, nil},
		},
		{
			name: "write with immediate consumes a receive",
			setup: func(a, b *end) nic.SendWR {
				fill(a.mr.Bytes()[:32], 3)
				postRecv(t, b, nic.RecvWR{ID: 10})
				addr, key := b.remote(4064)
				return nic.SendWR{ID: 5, Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: a.sge(0, 32), RemoteAddr: addr, RKey: key, Imm: 0xbeef}
			},
			check: func(t *testing.T, a, b *end) { assert.Equal(t, a.mr.Bytes()[:32], b.mr.Bytes()[4064:]) },
			want: result{nic.WC{ID: 5, Opcode: nic.OpRDMAWriteImm, ByteLen: 32},
				&nic.WC{ID: 10, Opcode: nic.OpRecvImm, ByteLen: 32, Imm: 0xbeef}},
		},
		{
			name: "read",
			setup: func(a, b *end) nic.SendWR {
				fill(b.mr.Bytes()[8:40], 11)
				addr, key := b.remote(8)
				return nic.SendWR{ID: 6, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: a.sge(100, 32), RemoteAddr: addr, RKey: key}
			},
			check: func(t *testing.T, a, b *end) { assert.Equal(t, b.mr.Bytes()[8:40], a.mr.Bytes()[100:132]) },
			want:  result{nic.WC{ID: 6, Opcode: nic.OpRDMARead, ByteLen: 32}, nil},
		},
		{
			name: "fetch-add",
			setup: func(a, b *end) nic.SendWR {
				binary.LittleEndian.PutUint64(b.mr.Bytes()[16:], 40)
				addr, key := b.remote(16)
				return nic.SendWR{ID: 11, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key, CompareAdd: 2}
			},
			check: func(t *testing.T, a, b *end) {
				assert.EqualValues(t, 42, binary.LittleEndian.Uint64(b.mr.Bytes()[16:]))
				assert.EqualValues(t, 40, binary.LittleEndian.Uint64(a.mr.Bytes()))
			},
			want: result{nic.WC{ID: 11, Opcode: nic.OpAtomicFAdd, ByteLen: 8}, nil},
		},
		{
			name: "compare-swap that matches",
			setup: func(a, b *end) nic.SendWR {
				binary.LittleEndian.PutUint64(b.mr.Bytes()[24:], 5)
				addr, key := b.remote(24)
				return nic.SendWR{ID: 12, Op: nic.OpAtomicCAS, Flags: nic.FlagSignaled, Local: a.sge(8, 8), RemoteAddr: addr, RKey: key, CompareAdd: 5, Swap: 77}
			},
			check: func(t *testing.T, a, b *end) {
				assert.EqualValues(t, 77, binary.LittleEndian.Uint64(b.mr.Bytes()[24:]))
				assert.EqualValues(t, 5, binary.LittleEndian.Uint64(a.mr.Bytes()[8:]))
			},
			want: result{nic.WC{ID: 12, Opcode: nic.OpAtomicCAS, ByteLen: 8}, nil},
		},
		{
			name: "compare-swap that does not match leaves memory",
			setup: func(a, b *end) nic.SendWR {
				binary.LittleEndian.PutUint64(b.mr.Bytes()[24:], 6)
				addr, key := b.remote(24)
				return nic.SendWR{ID: 13, Op: nic.OpAtomicCAS, Flags: nic.FlagSignaled, Local: a.sge(8, 8), RemoteAddr: addr, RKey: key, CompareAdd: 5, Swap: 77}
			},
			check: func(t *testing.T, a, b *end) {
				assert.EqualValues(t, 6, binary.LittleEndian.Uint64(b.mr.Bytes()[24:]))
				assert.EqualValues(t, 6, binary.LittleEndian.Uint64(a.mr.Bytes()[8:]))
			},
			want: result{nic.WC{ID: 13, Opcode: nic.OpAtomicCAS, ByteLen: 8}, nil},
		},
		{
			name: "nop",
			setup: func(a, b *end) nic.SendWR {
				return nic.SendWR{ID: 14, Op: nic.OpNop, Flags: nic.FlagSignaled}
			},
			want: result{nic.WC{ID: 14, Opcode: nic.OpNop}, nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn := New(Options{})
			a, b := pair(t, sn, allAccess, nic.QPConfig{MaxInline: 64})
			wr := tt.setup(a, b)
			postSend(t, a, wr)
			if wr.Flags&nic.FlagInline != 0 {
				clear(a.mr.Bytes()) // inline data was captured at post time
			}
			got := drain(t, a.scq, 1)
			want := tt.want.sendWC
			want.QPN = a.qp.Num()
			require.Equal(t, []nic.WC{want}, got)
			rwc := drain(t, b.rcq, 1)
			if tt.want.recvWC == nil {
				assert.Empty(t, rwc)
			} else {
				w := *tt.want.recvWC
				w.QPN = b.qp.Num()
				assert.Equal(t, []nic.WC{w}, rwc)
			}
			if tt.check != nil {
				tt.check(t, a, b)
			}
			assert.Empty(t, sn.Faults())
			assert.Empty(t, sn.Stalls())
		})
	}
}

// TestLoopback checks a QP connected to itself: a local DMA queue.
func TestLoopback(t *testing.T) {
	sn := New(Options{})
	a := newEnd(t, sn, 0, allAccess, nic.QPConfig{})
	require.NoError(t, a.qp.Connect(a.qp.Info()))
	fill(a.mr.Bytes()[:10], 1)
	postRecv(t, a, nic.RecvWR{ID: 2, Local: a.sge(100, 10)})
	postSend(t, a, nic.SendWR{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 10)})
	require.Len(t, drain(t, a.scq, 1), 1)
	require.Len(t, drain(t, a.rcq, 1), 1)
	assert.Equal(t, a.mr.Bytes()[:10], a.mr.Bytes()[100:110])
}

// TestInOrderMatching checks that the k-th send lands in the k-th receive and completions come
// in queue order.
func TestInOrderMatching(t *testing.T) {
	sn := New(Options{})
	a, b := pair(t, sn, allAccess, nic.QPConfig{})
	for k := 0; k < 5; k++ {
		a.mr.Bytes()[k] = byte(10 + k)
		postRecv(t, b, nic.RecvWR{ID: uint64(100 + k), Local: b.sge(200+k*8, 8)})
	}
	for k := 0; k < 5; k++ {
		postSend(t, a, nic.SendWR{ID: uint64(k), Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(k, 1)})
	}
	swc := drain(t, a.scq, 5)
	rwc := drain(t, b.rcq, 5)
	require.Len(t, swc, 5)
	require.Len(t, rwc, 5)
	for k := 0; k < 5; k++ {
		assert.EqualValues(t, k, swc[k].ID)
		assert.EqualValues(t, 100+k, rwc[k].ID)
		assert.Equal(t, byte(10+k), b.mr.Bytes()[200+k*8])
	}
}
