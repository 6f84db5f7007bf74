package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOrder(t *testing.T) {
	// libfabric's values (rdma/fabric.h).
	assert.Equal(t, Order(1<<1), OrderRAW)
	assert.Equal(t, Order(1<<7), OrderSAW)
	assert.Equal(t, Order(1<<8), OrderSAS)
	assert.Equal(t, Order(0x1FF), OrderStrict)

	assert.Equal(t, OrderSAW, Between(OpWrite.Class(), OpSend.Class()))
	assert.Equal(t, OrderRAW|OrderWAW, Between(OpWrite.Class(), OpAtomicAdd.Class()))
	assert.Equal(t, OrderNone, Between(OpRecv.Class(), OpSend.Class()))

	for _, c := range []struct {
		prev, next OpKind
		rc         bool
	}{
		{OpWrite, OpWrite, true},
		{OpWrite, OpSend, true},
		{OpSend, OpSend, true},
		{OpWrite, OpRead, true},
		{OpWrite, OpAtomicCAS, true},
		{OpSend, OpAtomicAdd, true},
		{OpRead, OpSend, false},      // a later op may overtake a read
		{OpRead, OpWrite, false},     //
		{OpAtomicAdd, OpSend, false}, // or an atomic
		{OpAtomicCAS, OpAtomicAdd, false},
		{OpRecv, OpRecv, false}, // not a send side
		{OpCopy, OpSend, false},
	} {
		assert.Equal(t, c.rc, OrderRC.Orders(c.prev, c.next), "%v then %v", c.prev, c.next)
		assert.Equal(t, c.prev.Class() != 0 && c.next.Class() != 0, OrderStrict.Orders(c.prev, c.next), "%v then %v", c.prev, c.next)
		assert.False(t, OrderNone.Orders(c.prev, c.next))
	}

	assert.Equal(t, "send-after-write ordering (FI_ORDER_SAW)", OrderSAW.Describe())
	assert.Equal(t, "write-after-write and send-after-write ordering (FI_ORDER_WAW, FI_ORDER_SAW)", (OrderSAW | OrderWAW).Describe())
	assert.Equal(t, "FI_ORDER_WAW|FI_ORDER_SAS", (OrderSAS | OrderWAW).String())
	assert.Equal(t, "FI_ORDER_NONE", OrderNone.String())
	assert.Equal(t, "none", OrderNone.Short())
	assert.Equal(t, "RAR RAW RAS WAW WAS SAW SAS", OrderRC.Short())
}
