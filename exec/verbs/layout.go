//go:build verbs && linux

package verbs

/*
#include <stddef.h>
#include "shim.h"

enum {
	offsetof_cd_recv_wr_id = offsetof(cd_recv_wr, id),
	offsetof_cd_recv_wr_local = offsetof(cd_recv_wr, local),
	offsetof_cd_send_wr_compare_add = offsetof(cd_send_wr, compare_add),
	offsetof_cd_send_wr_count = offsetof(cd_send_wr, count),
	offsetof_cd_send_wr_flags = offsetof(cd_send_wr, flags),
	offsetof_cd_send_wr_id = offsetof(cd_send_wr, id),
	offsetof_cd_send_wr_imm = offsetof(cd_send_wr, imm),
	offsetof_cd_send_wr_local = offsetof(cd_send_wr, local),
	offsetof_cd_send_wr_op = offsetof(cd_send_wr, op),
	offsetof_cd_send_wr_remote_addr = offsetof(cd_send_wr, remote_addr),
	offsetof_cd_send_wr_rkey = offsetof(cd_send_wr, rkey),
	offsetof_cd_send_wr_swap = offsetof(cd_send_wr, swap),
	offsetof_cd_send_wr_target_qp = offsetof(cd_send_wr, target_qp),
	offsetof_cd_send_wr_wait_cq = offsetof(cd_send_wr, wait_cq),
	offsetof_cd_send_wr_more = offsetof(cd_send_wr, more),
	offsetof_cd_send_wr_more_len = offsetof(cd_send_wr, more_len),
	offsetof_cd_recv_wr_more = offsetof(cd_recv_wr, more),
	offsetof_cd_recv_wr_more_len = offsetof(cd_recv_wr, more_len),
	offsetof_cd_sge_addr = offsetof(cd_sge, addr),
	offsetof_cd_sge_len = offsetof(cd_sge, len),
	offsetof_cd_sge_lkey = offsetof(cd_sge, lkey),
	offsetof_cd_wc_byte_len = offsetof(cd_wc, byte_len),
	offsetof_cd_wc_id = offsetof(cd_wc, id),
	offsetof_cd_wc_imm = offsetof(cd_wc, imm),
	offsetof_cd_wc_opcode = offsetof(cd_wc, opcode),
	offsetof_cd_wc_qpn = offsetof(cd_wc, qpn),
	offsetof_cd_wc_status = offsetof(cd_wc, status),
	offsetof_cd_wc_time = offsetof(cd_wc, time),
	size_cd_send_wr = sizeof(cd_send_wr),
	size_cd_recv_wr = sizeof(cd_recv_wr),
	size_cd_wc = sizeof(cd_wc),
};
*/
import "C"

import (
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// layoutMatches reports whether the Go work request and completion types have exactly the layout
// of their C mirrors, field by field, so the shim can read and write them in place.
func layoutMatches() bool {
	var s nic.SendWR
	var r nic.RecvWR
	var w nic.WC
	type pair struct{ goOff, cOff uintptr }
	checks := []pair{
		{unsafe.Sizeof(s), C.size_cd_send_wr},
		{unsafe.Offsetof(s.ID), C.offsetof_cd_send_wr_id},
		{unsafe.Offsetof(s.Op), C.offsetof_cd_send_wr_op},
		{unsafe.Offsetof(s.Flags), C.offsetof_cd_send_wr_flags},
		{unsafe.Offsetof(s.Local), C.offsetof_cd_send_wr_local},
		{unsafe.Offsetof(s.Local.Addr), C.offsetof_cd_sge_addr},
		{unsafe.Offsetof(s.Local.Len), C.offsetof_cd_sge_len},
		{unsafe.Offsetof(s.Local.LKey), C.offsetof_cd_sge_lkey},
		{unsafe.Offsetof(s.RemoteAddr), C.offsetof_cd_send_wr_remote_addr},
		{unsafe.Offsetof(s.RKey), C.offsetof_cd_send_wr_rkey},
		{unsafe.Offsetof(s.Imm), C.offsetof_cd_send_wr_imm},
		{unsafe.Offsetof(s.CompareAdd), C.offsetof_cd_send_wr_compare_add},
		{unsafe.Offsetof(s.Swap), C.offsetof_cd_send_wr_swap},
		{unsafe.Offsetof(s.WaitCQ), C.offsetof_cd_send_wr_wait_cq},
		{unsafe.Offsetof(s.TargetQP), C.offsetof_cd_send_wr_target_qp},
		{unsafe.Offsetof(s.Count), C.offsetof_cd_send_wr_count},
		{unsafe.Offsetof(s.More), C.offsetof_cd_send_wr_more},
		{unsafe.Offsetof(s.More) + unsafe.Sizeof(uintptr(0)), C.offsetof_cd_send_wr_more_len},
		{unsafe.Offsetof(r.More), C.offsetof_cd_recv_wr_more},
		{unsafe.Offsetof(r.More) + unsafe.Sizeof(uintptr(0)), C.offsetof_cd_recv_wr_more_len},
		{unsafe.Sizeof(r), C.size_cd_recv_wr},
		{unsafe.Offsetof(r.ID), C.offsetof_cd_recv_wr_id},
		{unsafe.Offsetof(r.Local), C.offsetof_cd_recv_wr_local},
		{unsafe.Sizeof(w), C.size_cd_wc},
		{unsafe.Offsetof(w.ID), C.offsetof_cd_wc_id},
		{unsafe.Offsetof(w.Status), C.offsetof_cd_wc_status},
		{unsafe.Offsetof(w.Opcode), C.offsetof_cd_wc_opcode},
		{unsafe.Offsetof(w.QPN), C.offsetof_cd_wc_qpn},
		{unsafe.Offsetof(w.ByteLen), C.offsetof_cd_wc_byte_len},
		{unsafe.Offsetof(w.Imm), C.offsetof_cd_wc_imm},
		{unsafe.Offsetof(w.Time), C.offsetof_cd_wc_time},
		{unsafe.Sizeof(s.Op), 1}, {unsafe.Sizeof(s.Flags), 1}, {unsafe.Sizeof(w.Status), 1}, {unsafe.Sizeof(w.Opcode), 1},
	}
	for _, c := range checks {
		if c.goOff != c.cOff {
			return false
		}
	}
	return true
}
