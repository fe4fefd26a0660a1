// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_unanswered`: RMA writes that asked for inject completion
//! only (`KFI_INJECT_COMPLETE`). On a MSG endpoint they complete once the
//! socket has taken their bytes, their frame tells the target not to
//! answer, and a target that refuses one ends the connection (no
//! operation is left to fail); an RDM endpoint answers every write. Raw
//! kernel-socket peers check each side; a kfabric pair checks that the
//! data lands where it should and that a read behind such writes sees it.

use kernel::prelude::*;

use super::{
    frame,
    kfi::kfi_sys as sys,
    ksock::{SockAddr, Socket},
    net::*,
    wire::{flags, Hdr, Op, RmaDesc, HDR_LEN, RMA_DESC_LEN},
};

use super::hostile_peers::*;

#[kunit_tests(kfi_sockets_unanswered)]
mod cases {
    use super::*;

    /// Reads the next frame's header from `s`: it must be a write, whose
    /// flags say `UNANSWERED` as `unanswered` does.
    fn recv_write(s: &Socket, unanswered: bool) -> Result<Hdr> {
        let h = frame::recv_hdr(s)?;
        ensure!(
            h.op == Op::Write && (h.flags & flags::UNANSWERED != 0) == unanswered,
            "frame {:?} with flags {:#x}",
            h.op,
            h.flags
        );
        Ok(h)
    }

    /// Whether completion `e` is that of write `ctx`.
    fn is_write(e: &sys::kfi_cq_data_entry, ctx: usize) -> bool {
        let f = sys::KFI_RMA | sys::KFI_WRITE;
        e.op_context as usize == ctx && e.flags & f == f
    }

    /// A write that asked for inject completion completes although the
    /// (raw) target never answers, and its frame says that none is
    /// wanted; a write at the default level to the same target waits for
    /// the answer.
    #[test]
    fn inject_complete_write_needs_no_answer() -> Result {
        let src = [0x3cu8; 256];
        let n = net(c"7517")?;
        let l = raw_listener(7517)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            let ret = post_write_at(&ep, &src, 0, 0x1234, 1, sys::KFI_INJECT_COMPLETE);
            ensure!(ret == 0, "write not posted: {}", ret);
            recv_write(&raw, true)?;
            let mut d = [0u8; RMA_DESC_LEN];
            frame::recv_exact(&raw, &mut d)?;
            let mut got = [0u8; 256];
            frame::recv_exact(&raw, &mut got)?;
            ensure!(got == src, "the payload differs");
            let mut e = sys::kfi_cq_data_entry::default();
            let r = sread_ms(&c, &mut e, 5000);
            ensure!(
                r == 1 && is_write(&e, 1),
                "no completion without an answer: {}",
                r
            );
            ensure!(post_write(&ep, &src, 0x1234, 2) == 0, "write not posted");
            let h = recv_write(&raw, false)?;
            drain(&raw, RMA_DESC_LEN + src.len())?;
            let r = sread_ms(&c, &mut e, 500);
            ensure!(
                r != 1 && r != -(sys::KFI_EAVAIL as isize),
                "the write completed ({}) before its answer",
                r
            );
            frame::send_frame(&raw, &Hdr::new(Op::Ack, h.id, 0), &[], &[])?;
            let r = sread_ms(&c, &mut e, 5000);
            ensure!(
                r == 1 && is_write(&e, 2),
                "no completion after the answer: {}",
                r
            );
            Ok(())
        })();
        drop(ep);
        drop(raw);
        outcome
    }

    /// A raw peer's write that asks for no answer, to a read-only region:
    /// the target writes nothing, answers nothing and ends the connection
    /// with `EACCES` on its EQ.
    #[test]
    fn refused_unanswered_write_ends_the_connection() -> Result {
        let mut ro = KVec::new();
        ro.resize(64, 0u8, GFP_KERNEL)?;
        let n = net(c"7518")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let mr = region(&n, &mut ro, sys::KFI_REMOTE_READ, 0)?;
        let k = key(&mr);
        let (raw, sep) = raw_client(&n, 7518, &c)?;
        let outcome = (|| -> Result {
            let mut h = Hdr::new(Op::Write, 1, 64);
            h.rma_count = 1;
            h.flags = flags::UNANSWERED;
            let d = RmaDesc {
                addr: 0,
                len: 64,
                key: k,
            };
            raw.send(&[&h.encode(), &d.encode(), &[0x77u8; 64]])?;
            ensure!(wait_readable(&raw, 5000), "the connection stayed up");
            let mut b = [0u8; HDR_LEN];
            ensure!(
                frame::recv_exact(&raw, &mut b).is_err(),
                "the refused write was answered"
            );
            let err = eq_error(&n)?;
            ensure!(
                err.fid == sep.fid() && err.err == -EACCES.to_errno(),
                "EQ error {}",
                err.err
            );
            ensure!(
                ro.iter().all(|&b| b == 0),
                "the read-only region was written"
            );
            Ok(())
        })();
        drop(sep);
        drop(raw);
        drop(mr);
        drop(pep);
        drop(ro);
        outcome
    }

    /// Between two kfabric endpoints: eight writes that asked for inject
    /// completion, each to its own part of the server's region, complete;
    /// a read of the whole region posted behind them returns every byte
    /// they wrote (the target handles a connection's frames in order).
    #[test]
    fn unanswered_writes_land_before_a_later_read() -> Result {
        const PART: usize = 4096;
        const PARTS: usize = 8;
        let mut dst = KVec::new();
        dst.resize(PART * PARTS, 0u8, GFP_KERNEL)?;
        let mut back = KVec::new();
        back.resize(PART * PARTS, 0u8, GFP_KERNEL)?;
        let mut src = KVec::new();
        for i in 0..PART * PARTS {
            src.push((i / PART * 37 + i % 251) as u8, GFP_KERNEL)?;
        }
        let n = net(c"7519")?;
        let pep = listen(&n)?;
        let (ccq, scq) = (cq(&n)?, cq(&n)?);
        let mr = region(
            &n,
            &mut dst,
            sys::KFI_REMOTE_WRITE | sys::KFI_REMOTE_READ,
            0,
        )?;
        let k = key(&mr);
        let (cep, sep) = connected_pair(&n, &ccq, &scq)?;
        let outcome = (|| -> Result {
            for p in 0..PARTS {
                let part = &src[p * PART..(p + 1) * PART];
                let at = (p * PART) as u64;
                let ret = post_write_at(&cep, part, at, k, 10 + p, sys::KFI_INJECT_COMPLETE);
                ensure!(ret == 0, "write {} not posted: {}", p, ret);
            }
            ensure!(post_read(&cep, &mut back, k, 99) == 0, "read not posted");
            let mut seen = 0;
            let mut read = false;
            let mut e = sys::kfi_cq_data_entry::default();
            while seen < PARTS || !read {
                let r = sread_ms(&ccq, &mut e, 5000);
                ensure!(r == 1, "{} writes, read {}: then {}", seen, read, r);
                if e.op_context as usize == 99 {
                    read = true;
                } else {
                    ensure!(
                        is_write(&e, 10 + seen),
                        "completion {:#x}",
                        e.op_context as usize
                    );
                    seen += 1;
                }
            }
            let bad = back.iter().zip(src.iter()).position(|(a, b)| a != b);
            ensure!(bad.is_none(), "the read returned byte {:?} different", bad);
            Ok(())
        })();
        drop(cep);
        drop(sep);
        drop(mr);
        drop(pep);
        drop(dst);
        outcome
    }

    /// An RDM endpoint answers every write: one that asked for inject
    /// completion reaches the (raw) peer without `UNANSWERED` and completes
    /// only on the answer, with its status (a refused unanswered write
    /// would end a connection that has no event queue to say why).
    #[test]
    fn rdm_writes_are_always_answered() -> Result {
        let src = [0x5au8; 64];
        let r = rdm_side(c"7520")?;
        let peer = raw_listener(7521)?;
        let to = r.av.insert(SockAddr::v4([127, 0, 0, 1], 7521).as_bytes());
        ensure!(to.is_ok(), "kfi_av_insert: {:?}", to);
        let to = to.map_err(|_| EINVAL)?;
        // `src` is declared before `r`, so it outlives the endpoint,
        // whose close ends the write.
        let ret = post_write_to(&r.ep, &src, to, 0x1234, 7, sys::KFI_INJECT_COMPLETE);
        ensure!(ret == 0, "write not posted: {}", ret);
        let Some(s) = accept_within(&peer, 5000) else {
            pr_err!("kfi_sockets_unanswered: the peer was never connected to\n");
            return Err(EBADE);
        };
        frame::read_connreq(&s)?;
        frame::accept(&s, &[])?;
        ensure!(wait_readable(&s, 5000), "no write for the peer");
        let h = recv_write(&s, false)?;
        drain(&s, RMA_DESC_LEN + src.len())?;
        let mut e = sys::kfi_cq_data_entry::default();
        let n = sread_ms(&r.c, &mut e, 500);
        ensure!(
            n != 1 && n != -(sys::KFI_EAVAIL as isize),
            "the write completed ({}) before its answer",
            n
        );
        let mut ack = Hdr::new(Op::Ack, h.id, 0);
        ack.data = (-EACCES.to_errno()) as u64;
        frame::send_frame(&s, &ack, &[], &[])?;
        let err = cq_error(&r.c, 5000)?;
        ensure!(
            err.op_context as usize == 7 && err.err == -EACCES.to_errno(),
            "write error {} for context {:#x}",
            err.err,
            err.op_context as usize
        );
        drop(s);
        Ok(())
    }
}
