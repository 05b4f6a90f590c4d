/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric: an in-process model of rdma_cm and RC verbs, faithful
 * enough that protocol code unit-tested on it behaves the same on rxe.
 *
 * All state is process-wide behind one mutex, so every fabric created in
 * the process (say a client and a server context, on any threads) reaches
 * the others by port. The data path never blocks: work requests execute
 * at post time, under the lock, except those queued behind a send that
 * found no receive posted (RNR).
 *
 * What is modelled, and how:
 *  - rdma_cm: a queue of connect requests per listening port; accept()
 *    establishes both sides at once. Private data is zero-padded to the IB
 *    CM sizes (connect 56, accept 196, reject 148), as IB CM delivers it;
 *    a connect refused for want of a listener carries none.
 *  - QP states: INIT after create_qp (receives may be posted, sends are
 *    -EINVAL), RTS once connected, ERR. Entering ERR flushes the QP's
 *    queued sends and its own posted receives (not those of its SRQ) with
 *    FLUSHED completions; WRs posted in ERR complete FLUSHED at once.
 *  - Send queue slots: a WR holds its slot until the completion covering
 *    it is polled (an unsignaled WR is covered by the next completion of
 *    its QP), as providers free slots in poll_cq. A QP that only posts
 *    unsignaled WRs therefore fills up and gets -ENOMEM, as on hardware.
 *    Receive queue slots are freed when a message consumes them.
 *  - RNR: a SEND, SEND_IMM or WRITE_IMM meeting an empty receive queue
 *    stays at the head of its QP's queue with everything posted after it
 *    (RC executes in order) and is delivered when the peer posts a
 *    receive. With rnr_retry < 7 it fails with RNR_RETRY (requester QP to
 *    ERR) unless a receive comes within (rnr_retry + 1) ms of the first
 *    refusal. The deadline is checked whenever the QP is progressed: on
 *    post_send, when the peer posts receives, and on every poll of the
 *    QP's send CQ (the only place a requester can see the failure).
 *    Receives posted to an SRQ go to its waiting senders in no fair order.
 *  - INLINE data is copied at post time (no lkey needed) and limited to
 *    the max_inline asked for at create_qp; other data is read when the
 *    WR executes, which for a WR held up by RNR is when it is delivered.
 *  - Errors: remote access and length errors put both QPs in ERR, local
 *    protection and RNR only the requester's; a requester whose peer QP is
 *    in ERR while still connected gets RETRY (the peer stopped answering).
 *    vendor_status holds the matching ibv_wc_status number.
 *  - A silent host (rdmx__fake_silence, a test's dead peer): its QP runs
 *    nothing; a WR its peer posts toward it waits at the head of the
 *    queue and fails with RETRY after (retry_count + 1) local ACK
 *    timeouts (caps.ack_timeout, 0: 17), as the transport gives up;
 *    retry_count 7 retries forever, as rxe does (rxe_comp.c never counts
 *    down a retry_cnt of 7; the IB spec gives 7 no such meaning).
 *  - Keys: lkey and rkey differ (even, odd) so one used for the other
 *    fails; any region's rkey registered in the process is valid remotely
 *    (one protection domain), and a zero-length transfer checks no key.
 *    A memory window's rkey (type 2B, mw_bind) is valid only for an
 *    access arriving on the QP it is bound to, within its range and
 *    rights; deallocated (or its region gone) no key finds it. A refused
 *    key fails as on a device: RC errs the requester's WR with a remote
 *    access error and both QPs go to ERR; UC drops the WRITE. Every local access is checked
 *    against the lkey's MR (range), and what the NIC writes locally (a
 *    receive, a READ's or FETCH_ADD's destination) needs LOCAL access.
 *  - The owner of memory reached by WRITE/READ/FETCH_ADD may access it
 *    concurrently with __atomic operations. Built with ThreadSanitizer,
 *    the fake moves remote bytes one at a time with atomic release stores
 *    (acquire loads for READ), so an owner polling a flag written last
 *    with an acquire load sees the data before it race-free; otherwise
 *    8-byte release stores in increasing address order (never a memmove,
 *    which may store its last bytes first). An aligned 8-byte READ is
 *    one acquire load (never torn), FETCH_ADD always an __atomic_fetch_add.
 *  - A CQ holds exactly @depth completions. Overflowing one is a caller
 *    bug: it is reported on stderr and poll_cq returns -EOVERFLOW forever.
 */
#include "fabric.h"
#include "fabric_fake_base.h"
#include "fabric_fake_cm.h"
#include "fabric_fake_post.h"
#include "fabric_fake_qp.h"

/*
 * The seam's ops, from the files of the fake, bottom first:
 *   fabric_fake_base.c  the fabric, its domain, memory regions
 *   fabric_fake_qp.c    CQs, SRQs, QPs
 *   fabric_fake_post.c  posting, execution, completions
 *   fabric_fake_cm.c    rdma_cm
 *   fabric_fake_dgram.c UD and UC QPs (rdmx__dgram_fake)
 */
const struct rdmx__fabric_ops rdmx__fabric_fake = {
	.name = "fake",
	.create = rdmx__fake_create,
	.destroy = rdmx__fake_destroy,
	.listen = rdmx__fake_listen,
	.local_port = rdmx__fake_local_port,
	.get_request = rdmx__fake_get_request,
	.resolve = rdmx__fake_resolve,
	.resolve_src = rdmx__fake_resolve_src,
	.connect = rdmx__fake_connect,
	.accept = rdmx__fake_accept,
	.accept_poll = rdmx__fake_accept_poll,
	.reject = rdmx__fake_reject,
	.disconnect = rdmx__fake_disconnect,
	.check_event = rdmx__fake_check_event,
	.destroy_ep = rdmx__fake_destroy_ep,
	.reg_mr = rdmx__fake_reg_mr,
	.dereg_mr = rdmx__fake_dereg_mr,
	.create_cq = rdmx__fake_create_cq,
	.destroy_cq = rdmx__fake_destroy_cq,
	.create_srq = rdmx__fake_create_srq,
	.destroy_srq = rdmx__fake_destroy_srq,
	.create_qp = rdmx__fake_create_qp,
	.qp_num = rdmx__fake_qp_num,
	.post_send = rdmx__fake_post_send,
	.post_recv = rdmx__fake_post_recv,
	.post_srq_recv = rdmx__fake_post_srq_recv,
	.poll_cq = rdmx__fake_poll_cq,
	.cq_fd = rdmx__fake_cq_fd,
	.cq_arm = rdmx__fake_cq_arm,
	.ep_fd = rdmx__fake_ep_fd,
	.domain = rdmx__fake_domain,
	.addr_str = rdmx__fake_addr_str,
	.dgram = &rdmx__dgram_fake,
	.mw_alloc = rdmx__fake_mw_alloc,
	.mw_bind = rdmx__fake_mw_bind,
	.mw_dealloc = rdmx__fake_mw_dealloc,
	.peer_gid = rdmx__fake_peer_gid,
};
