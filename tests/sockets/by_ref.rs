// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_by_ref`: RMA writes whose payload kfi_sockets sends by
//! page reference (`prov/sockets/splice.rs`: an answered write of at least
//! `splice_min_bytes`, 16 KiB by default; vmalloc'd here, as a large
//! kmalloc's pages count no references and are copied), against a raw
//! kernel-socket target. The bytes must arrive
//! as they are in the buffers, gathered from several pieces at any
//! offset; the write must complete once, on the answer. An answer that
//! comes before TCP has acknowledged the whole frame (the target cannot
//! have read it) must end the connection with `EPROTO` and fail the
//! write: it would let the ULP reuse a buffer whose pages the socket may
//! still send.

use kernel::prelude::*;

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::{Deadline, Socket},
    net::*,
    wire::{Hdr, Op},
};

use super::hostile_peers::*;

/// Byte `i` of the source buffer in round `round`.
fn pattern(round: usize, i: usize) -> u8 {
    (i.wrapping_mul(13) ^ round.wrapping_mul(71) ^ (i >> 12)) as u8
}

/// Reads a write frame of `len` payload bytes from `raw`, whole: its
/// header and payload.
fn read_write(raw: &Socket, len: usize) -> Result<(Hdr, KVVec<u8>)> {
    let h = frame::recv_hdr(raw)?;
    ensure!(
        h.op == Op::Write && h.len == len as u64,
        "not the write: {:?} of {}",
        h.op,
        h.len
    );
    let d = frame::recv_rma(raw, &h)?;
    ensure!(d.as_slice().len() == 1, "descriptors {:?}", d.as_slice());
    let mut got = KVVec::with_capacity(len, GFP_KERNEL)?;
    got.resize(len, 0u8, GFP_KERNEL)?;
    frame::recv_exact(raw, &mut got)?;
    Ok((h, got))
}

/// Waits for the completion of write `ctx`: it must be the only one.
fn write_done(c: &Owned<sys::kfid_cq>, ctx: usize, len: usize) -> Result {
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread_ms(c, &mut e, WAIT_MS);
    ensure!(r == 1, "no write completion: {}", r);
    ensure!(
        e.op_context as usize == ctx && e.flags & sys::KFI_WRITE != 0 && e.len == len,
        "completion of {} flags {:#x} len {}",
        e.op_context as usize,
        e.flags,
        e.len
    );
    let r = sread_ms(c, &mut e, 100);
    ensure!(r != 1, "a second completion, of {}", e.op_context as usize);
    Ok(())
}

/// Pieces one write gathers in round `round`: one buffer of `src`, three
/// pieces of it at odd offsets and lengths (each piece's pages referenced
/// from the middle), or pieces of it around `slab`, a small kmalloc'd
/// buffer (slab memory, which the provider copies within the frame).
fn pieces<'a>(src: &'a [u8], slab: &'a [u8], round: usize) -> Result<KVec<&'a [u8]>> {
    let mut v = KVec::new();
    let cuts: &[(usize, usize)] = match round % 3 {
        0 => &[(0, 128 << 10)],
        1 => &[(100, 40_000), (40_001, 65_536), (70_003, 135_001)],
        _ => &[(5, 30_000), (30_000, 70_000)],
    };
    for (k, &(a, b)) in cuts.iter().enumerate() {
        if round % 3 == 2 && k == 1 {
            v.push(slab, GFP_KERNEL)?;
        }
        v.push(src.get(a..b).ok_or(EINVAL)?, GFP_KERNEL)?;
    }
    Ok(v)
}

#[kunit_tests(kfi_sockets_by_ref)]
mod cases {
    use super::*;

    /// Writes of 40 to 128 KiB, from one buffer, gathered from three
    /// pieces, or with a piece of slab memory among them, to a target that
    /// reads slowly (a small receive buffer: the socket sends the pages in
    /// many segments) or not: the target gets every byte as it was in the
    /// pieces, the write completes once, on the answer, after the target
    /// read the whole frame.
    #[test]
    fn writes_by_reference_land_whole() -> Result {
        let mut src = VVec::with_capacity(160 << 10, GFP_KERNEL)?;
        src.resize(160 << 10, 0u8, GFP_KERNEL)?;
        let mut slab = KVec::with_capacity(1500, GFP_KERNEL)?;
        slab.resize(1500, 0u8, GFP_KERNEL)?;
        for (port, cport, small) in [(7545u16, c"7545", false), (7546, c"7546", true)] {
            let n = net(cport)?;
            let l = raw_listener(port)?;
            if small {
                l.set_rcvbuf(4096)?;
            }
            let c = cq(&n)?;
            let (ep, raw) = kfi_client(&n, &c, &l)?;
            let outcome = (|| -> Result {
                for round in 0..6 {
                    for (i, b) in src.iter_mut().enumerate() {
                        *b = pattern(round, i);
                    }
                    for (i, b) in slab.iter_mut().enumerate() {
                        *b = !pattern(round, i);
                    }
                    let parts = pieces(&src, &slab, round)?;
                    let len: usize = parts.iter().map(|p| p.len()).sum();
                    let ctx = 20 + round;
                    ensure!(
                        post_write_iov(&ep, &parts, 0x99, ctx) == 0,
                        "write not posted"
                    );
                    let (h, got) = read_write(&raw, len)?;
                    let want = parts.iter().flat_map(|p| p.iter());
                    let bad = got.iter().zip(want).position(|(a, b)| a != b);
                    ensure!(bad.is_none(), "round {}: byte {:?} differs", round, bad);
                    frame::send_frame(&raw, &Hdr::new(Op::Ack, h.id, 0), &[], &[])?;
                    write_done(&c, ctx, len)?;
                }
                Ok(())
            })()
            .inspect_err(|e| pr_err!("by_ref: small window {}: {:?}\n", small, e));
            drop(ep);
            drop(raw);
            outcome?;
        }
        Ok(())
    }

    /// The target answers a write by reference after its header, before
    /// it has read the payload (its small receive buffer holds TCP back):
    /// the answer breaks the protocol. The connection ends with `EPROTO`,
    /// and the write fails (`ECANCELED` at the teardown, or `EPROTO`),
    /// never completes.
    #[test]
    fn an_answer_before_tcp_has_the_bytes_ends_the_connection() -> Result {
        const LEN: usize = 1 << 20;
        let mut src = VVec::with_capacity(LEN, GFP_KERNEL)?;
        src.resize(LEN, 0x3c, GFP_KERNEL)?;
        let n = net(c"7547")?;
        let l = raw_listener(7547)?;
        l.set_rcvbuf(4096)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            write_answered_early(&n, &c, &ep, &raw, &[&src], 7)?;
            let (ev, _, _) = event(&n)?;
            ensure!(ev == sys::KFI_SHUTDOWN, "event {} after the error", ev);
            // The failed write's pages never go out after its completion:
            // the connection was reset, its unsent bytes dropped.
            raw.set_rx_deadline(Some(Deadline::after_ms(5000)));
            let mut sink = KVec::with_capacity(64 << 10, GFP_KERNEL)?;
            sink.resize(64 << 10, 0u8, GFP_KERNEL)?;
            let mut got = 0usize;
            while let Ok(k @ 1..) = raw.recv(&mut sink, false) {
                got += k;
            }
            ensure!(got < LEN, "the target still got all {} bytes", got);
            Ok(())
        })();
        drop(ep);
        drop(raw);
        drop(src);
        outcome
    }
}
