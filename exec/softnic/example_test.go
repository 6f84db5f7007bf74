package softnic_test

import (
	"fmt"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

// Two ranks of one software NIC: rank 0 writes 5 bytes into rank 1's registered buffer.
func Example() {
	nic := softnic.New(softnic.Options{})
	type rank struct {
		cq exec.CQ
		qp exec.QP
		mr exec.MR
	}
	var rs [2]rank
	for r := range rs {
		ctx, _ := nic.Open(r)
		pd, _ := ctx.AllocPD()
		rs[r].cq, _ = ctx.CreateCQ(16)
		rs[r].mr, _ = pd.AllocMR(64, exec.AccessLocalWrite|exec.AccessRemoteWrite)
		rs[r].qp, _ = pd.CreateQP(exec.QPConfig{SendCQ: rs[r].cq, RecvCQ: rs[r].cq, SendDepth: 8, RecvDepth: 8})
	}
	_ = rs[0].qp.Connect(rs[1].qp.Info())
	_ = rs[1].qp.Connect(rs[0].qp.Info())

	copy(rs[0].mr.Bytes(), "hello")
	dst := rs[1].mr.Remote() // what rank 1 would send to rank 0 over the bootstrap
	_, err := rs[0].qp.PostSend([]exec.SendWR{{
		ID: 42, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled,
		Local:      exec.SGE{Addr: rs[0].mr.Addr(), Len: 5, LKey: rs[0].mr.LKey()},
		RemoteAddr: dst.Addr, RKey: dst.RKey,
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	wc := make([]exec.WC, 4)
	n, _ := rs[0].cq.Poll(wc) // polling drives the fabric
	fmt.Println(n, wc[0].ID, wc[0].Opcode, wc[0].Status)
	fmt.Printf("%s\n", rs[1].mr.Bytes()[:5])
	fmt.Println(nic.NICStats().Bytes, "bytes moved")
	// Output:
	// 1 42 RDMA_WRITE success
	// hello
	// 5 bytes moved
}
