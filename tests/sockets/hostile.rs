// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_hostile`: kfi_sockets against peers that break the rules
//! on purpose. Each case is a raw kernel-socket peer (the provider's own
//! framing, included by path) on one side of a loopback connection and a
//! kfabric endpoint on the other, and checks the provider's reaction: no
//! early completion, no access beyond a region's rights, no spoofed RDM
//! peer, a bounded CQ-data flood, cancelled operations at shutdown.
//!
//! Checks return an error instead of asserting, so that a failing case
//! still closes its objects (a failed assertion would end the test thread
//! with its endpoints and buffers in use).

use kernel::prelude::*;

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::{SockAddr, Socket},
    net::*,
    wire::{Hdr, Op, HDR_LEN, RMA_DESC_LEN},
};

/// Fails the case with a message unless `$c` holds.
macro_rules! ensure {
    ($c:expr, $($msg:tt)+) => {
        if !$c {
            pr_err!("kfi_sockets_hostile: {}\n", format_args!($($msg)+));
            return Err(EBADE);
        }
    };
}

/// Waits up to `ms` for a completion: 1, or a negative errno
/// (`-KFI_EAVAIL` for an error entry).
fn sread_ms(cq: &Owned<sys::kfid_cq>, e: &mut sys::kfi_cq_data_entry, ms: i32) -> isize {
    // SAFETY: Open CQ of DATA format, one entry of room.
    unsafe {
        sys::kfi_cq_sread(
            cq.as_ptr(),
            core::ptr::from_mut(e).cast(),
            1,
            core::ptr::null(),
            ms,
        )
    }
}

/// A raw listener on 127.0.0.1:`port`.
fn raw_listener(port: u16) -> Result<Socket> {
    let a = SockAddr::v4([127, 0, 0, 1], port);
    let l = Socket::tcp(&a)?;
    l.bind(&a)?;
    l.listen(8)?;
    Ok(l)
}

/// A kfabric client endpoint of `n` connected to the raw server `l`,
/// which accepts it: (endpoint, the raw server's socket).
fn kfi_client(
    n: &Net,
    c: &Owned<sys::kfid_cq>,
    l: &Socket,
) -> Result<(Owned<sys::kfid_ep>, Socket)> {
    let ep = endpoint(n, n.dst.first(), c)?;
    // SAFETY: An open, bound endpoint.
    let ret = unsafe { sys::kfi_connect(ep.as_ptr(), core::ptr::null(), core::ptr::null(), 0) };
    kernel::error::to_result(ret)?;
    let s = l.accept(false)?;
    frame::read_connreq(&s)?;
    frame::accept(&s, &[])?;
    let (ev, _, _) = event(n)?;
    ensure!(ev == sys::KFI_CONNECTED, "client event {}", ev);
    Ok((ep, s))
}

/// Posts an RMA write of `buf` to `len` bytes at 0 of region `key`.
fn post_write(ep: &Owned<sys::kfid_ep>, buf: &[u8], key: u64, ctx: usize) -> c_int {
    let v = kvec(buf);
    let remote = sys::kfi_rma_iov {
        addr: 0,
        len: buf.len(),
        key,
    };
    let mut m = sys::kfi_msg_rma {
        rma_iov: &remote,
        rma_iov_count: 1,
        ..Default::default()
    };
    m.msg.iov_type = sys::KFI_KVEC;
    m.msg.__bindgen_anon_1.msg_iov = &v;
    m.msg.iov_count = 1;
    m.msg.context = ctx as *mut c_void;
    // SAFETY: An open endpoint; callers keep `buf` until the completion.
    unsafe { sys::kfi_writemsg(ep.as_ptr(), &m, 0) }
}

/// Reads and drops `len` bytes from `s`.
fn drain(s: &Socket, mut len: usize) -> Result {
    let mut sink = KVec::with_capacity(64 << 10, GFP_KERNEL)?;
    sink.resize(64 << 10, 0u8, GFP_KERNEL)?;
    while len > 0 {
        let k = len.min(sink.len());
        frame::recv_exact(s, &mut sink[..k])?;
        len -= k;
    }
    Ok(())
}

#[kunit_tests(kfi_sockets_hostile)]
mod cases {
    use super::*;

    /// Issue 10, bug 1: the target answers a write while its frame is still
    /// being sent. The write must not complete (the ULP would free a buffer
    /// the socket still reads) until the whole frame has left.
    #[test]
    fn early_response_waits_for_the_send() -> Result {
        const LEN: usize = 16 << 20;
        let mut src = KVVec::with_capacity(LEN, GFP_KERNEL)?;
        src.resize(LEN, 0x5a, GFP_KERNEL)?;
        let n = net(c"7480")?;
        let l = raw_listener(7480)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        ensure!(post_write(&ep, &src, 0x1234, 5) == 0, "write not posted");
        let mut hb = [0u8; HDR_LEN];
        frame::recv_exact(&raw, &mut hb)?;
        let h = Hdr::decode(&hb)?;
        ensure!(h.op == Op::Write && h.len == LEN as u64, "not the write");
        let mut db = [0u8; RMA_DESC_LEN];
        frame::recv_exact(&raw, &mut db)?;
        // The answer comes before the payload was read: the sender is still
        // in the middle of the frame.
        frame::send_frame(&raw, &Hdr::new(Op::Ack, h.id, 0), &[], &[])?;
        let mut e = sys::kfi_cq_data_entry::default();
        let r = sread_ms(&c, &mut e, 1000);
        ensure!(
            r != 1 && r != -(sys::KFI_EAVAIL as isize),
            "the write completed ({}) while its frame was being sent",
            r
        );
        drain(&raw, LEN)?;
        // Now the frame is out, and the early answer completes it.
        let r = sread_ms(&c, &mut e, WAIT_MS);
        ensure!(r == 1, "no completion after the send: {}", r);
        ensure!(
            e.op_context as usize == 5,
            "context {}",
            e.op_context as usize
        );
        ensure!(
            e.flags & (sys::KFI_RMA | sys::KFI_WRITE) == sys::KFI_RMA | sys::KFI_WRITE,
            "flags {:#x}",
            e.flags
        );
        drop(ep);
        drop(raw);
        drop(src);
        Ok(())
    }
}
