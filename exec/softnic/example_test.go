package softnic_test

import (
	"fmt"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
)

// Two ranks of one software NIC: rank 0 writes 5 bytes into rank 1's registered buffer.
func Example() {
	sn := softnic.New(softnic.Options{})
	type rank struct {
		cq nic.CQ
		qp nic.QP
		mr nic.MR
	}
	var rs [2]rank
	for r := range rs {
		ctx, _ := sn.Open(r)
		pd, _ := ctx.AllocPD()
		rs[r].cq, _ = ctx.CreateCQ(16)
		rs[r].mr, _ = pd.AllocMR(64, nic.AccessLocalWrite|nic.AccessRemoteWrite)
		rs[r].qp, _ = pd.CreateQP(nic.QPConfig{SendCQ: rs[r].cq, RecvCQ: rs[r].cq, SendDepth: 8, RecvDepth: 8})
	}
	_ = rs[0].qp.Connect(rs[1].qp.Info())
	_ = rs[1].qp.Connect(rs[0].qp.Info())

	copy(rs[0].mr.Bytes(), "hello")
	dst := rs[1].mr.Remote() // what rank 1 would send to rank 0 over the bootstrap
	_, err := rs[0].qp.PostSend([]nic.SendWR{{
		ID: 42, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled,
		Local:      nic.SGE{Addr: rs[0].mr.Addr(), Len: 5, LKey: rs[0].mr.LKey()},
		RemoteAddr: dst.Addr, RKey: dst.RKey,
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	wc := make([]nic.WC, 4)
	n, _ := rs[0].cq.Poll(wc) // polling drives the fabric
	fmt.Println(n, wc[0].ID, wc[0].Opcode, wc[0].Status)
	fmt.Printf("%s\n", rs[1].mr.Bytes()[:5])
	fmt.Println(sn.NICStats().Bytes, "bytes moved")
	// Output:
	// 1 42 RDMA_WRITE success
	// hello
	// 5 bytes moved
}
