// SPDX-License-Identifier: GPL-2.0

//! kfi_twohost.ko: the two-host suite `kfi_2host`, one side per kernel.
//!
//! Two guests joined by a virtual NIC (scripts/twohost.sh) each load this
//! module, one with `role=server`, the other with `role=client`. Each case
//! runs on both: the server listens on `server_node` and the client
//! connects to it across the wire, so nothing is shared but the network.
//! Every byte is checked by the side that receives or owns it: messages
//! both ways (the receiver checks length, CQ data and bytes), RMA writes
//! into the server's memory (the server checks the region and reports its
//! verdict in a message) and RMA reads of it (the client checks). Each
//! side reports its own KUnit results; a side whose peer never comes
//! fails at a deadline (`wait_s`), it never hangs.

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
// Shared with kfi_twohost_bench.ko.
#[allow(dead_code)]
mod link;

use link::role;

module! {
    type: KfiTwohost,
    name: "kfi_twohost",
    authors: ["kfabric developers"],
    description: "kfabric across two hosts: one side of each case per kernel",
    license: "GPL",
}

struct KfiTwohost;

impl kernel::Module for KfiTwohost {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // A module loaded without a side would fail every case for a reason
        // that is no bug of the code under test.
        role()?;
        Ok(Self)
    }
}

/// Byte `off` of the data of operation `seed`: differs per operation and
/// per offset, so bytes that land at the wrong place are caught.
fn byte(seed: u32, off: usize) -> u8 {
    let x = (off as u32)
        .wrapping_add(seed.wrapping_mul(0x9e37_79b9))
        .wrapping_mul(2_654_435_761);
    (x >> 24) as u8
}

/// `len` bytes of operation `seed`'s data, in vmalloc memory.
fn pattern(len: usize, seed: u32) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    for off in 0..len {
        v.push(byte(seed, off), GFP_KERNEL)?;
    }
    Ok(v)
}

/// Where `buf` first differs from operation `seed`'s data starting at
/// offset `from` of it (`None`: nowhere).
fn first_bad(buf: &[u8], seed: u32, from: usize) -> Option<usize> {
    buf.iter()
        .enumerate()
        .position(|(i, &b)| b != byte(seed, from.wrapping_add(i)))
}

fn filled(len: usize, fill: u8) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    v.resize(len, fill, GFP_KERNEL)?;
    Ok(v)
}

#[kunit_tests(kfi_2host)]
mod twohost {
    use super::{
        filled, first_bad,
        kfi::kfi_sys as sys,
        link::{
            complete, complete_err, key, link, mr, next_completion, next_event, post_recv,
            post_rma, post_send, role, Link, Role,
        },
        net::*,
        pattern,
    };
    use kernel::{
        prelude::*,
        time::{delay::fsleep, Delta, Instant, Monotonic},
    };

    /// Message sizes of `messages_both_ways`: empty, odd, page-crossing,
    /// and larger than any socket buffer.
    const SIZES: [usize; 7] = [0, 1, 7, 4097, 65539, 1 << 20, 16 << 20];
    /// Seed of the reply to message `i`.
    const REPLY: u32 = 0x80;

    /// Messages of every size from the client to the server and back:
    /// the receiver checks the length, the CQ data, the flags, every byte
    /// and that nothing was written past the message.
    #[test]
    fn messages_both_ways() -> Result {
        let l = link(0, 16)?;
        let server = role()? == Role::Server;
        for (i, &size) in SIZES.iter().enumerate() {
            let seed = i as u32;
            let (out_seed, in_seed) = if server {
                (seed + REPLY, seed)
            } else {
                (seed, seed + REPLY)
            };
            let out = pattern(size, out_seed)?;
            let mut inb = filled(size + 8, 0xee)?;
            // The client posts its receive for the reply before it sends;
            // the server replies once the message is in.
            post_recv(&l, &mut inb, 100 + i)?;
            let e = if server {
                let [e] = complete(&l.cq, [100 + i])?;
                e
            } else {
                post_send(
                    &l,
                    &out,
                    200 + i,
                    u64::from(out_seed),
                    sys::KFI_REMOTE_CQ_DATA,
                )?;
                // Two operations: the reply's completion may come first
                // (the sender was preempted between its send and the
                // report, and the reply overtook it).
                let [_, e] = complete(&l.cq, [200 + i, 100 + i])?;
                e
            };
            assert_eq!((e.len, e.data), (size, u64::from(in_seed)));
            assert_eq!(
                e.flags & (sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA),
                sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA
            );
            if let Some(at) = first_bad(&inb[..size], in_seed, 0) {
                pr_err!(
                    "kfi_twohost: message {} of {} B: wrong byte at {}\n",
                    i,
                    size,
                    at
                );
            }
            assert!(first_bad(&inb[..size], in_seed, 0).is_none());
            assert!(inb[size..].iter().all(|&b| b == 0xee));
            if server {
                post_send(
                    &l,
                    &out,
                    200 + i,
                    u64::from(out_seed),
                    sys::KFI_REMOTE_CQ_DATA,
                )?;
                complete(&l.cq, [200 + i])?;
            }
        }
        farewell(&l, server)
    }

    /// The end of a case: the client says it is done, delivered before
    /// its send completes, so that neither side closes while the other
    /// still waits for data.
    fn farewell(l: &Link, server: bool) -> Result {
        let mut note = [0u8; 8];
        if server {
            post_recv(l, &mut note, 90)?;
            complete(&l.cq, [90])?;
            assert_eq!(&note, b"all done");
        } else {
            post_send(l, b"all done", 91, 0, sys::KFI_DELIVERY_COMPLETE)?;
            complete(&l.cq, [91])?;
        }
        Ok(())
    }

    /// Size of the server's regions in `rma_write_and_read`.
    const REGION: usize = 1 << 20;
    /// Remote addresses of the regions (offset-based keys).
    const WBASE: u64 = 0x1000_0000;
    const RBASE: u64 = 0x2000_0000;
    /// Seed of the region the client reads.
    const RSEED: u32 = 0x55;
    /// The client's writes: (offset, length), write `i` carries seed `i`.
    const WRITES: [(usize, usize); 4] = [(0, 1), (1, 4095), (4096, 65539), (69635, REGION - 69635)];

    /// The server's region after the client's writes: where it first
    /// differs from them.
    fn written_bad(region: &[u8]) -> Option<usize> {
        WRITES.iter().enumerate().find_map(|(i, &(off, len))| {
            let part = region.get(off..off + len)?;
            first_bad(part, i as u32, 0).map(|at| off + at)
        })
    }

    /// The client writes into a region of the server and reads another
    /// back, across the wire: the server checks every written byte and
    /// sends its verdict; the client checks every byte it reads, and reads
    /// back what it wrote.
    #[test]
    fn rma_write_and_read() -> Result {
        let l = link(1, 16)?;
        // The server's offer, the client's "written", the verdict.
        let mut keys = [0u8; 16];
        let mut note = [0u8; 8];
        if role()? == Role::Server {
            let mut w = filled(REGION, 0)?;
            let mut r = pattern(REGION, RSEED)?;
            let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
            let wmr = mr(&l, &mut w, access, WBASE)?;
            let rmr = mr(&l, &mut r, sys::KFI_REMOTE_READ, RBASE)?;
            keys[..8].copy_from_slice(&key(&wmr).to_le_bytes());
            keys[8..].copy_from_slice(&key(&rmr).to_le_bytes());
            post_recv(&l, &mut note, 1)?;
            post_send(&l, &keys, 2, 0, 0)?;
            complete(&l.cq, [1, 2])?;
            assert_eq!(&note, b"written!");
            let bad = written_bad(&w);
            if let Some(at) = bad {
                pr_err!("kfi_twohost: RMA-written region: wrong byte at {}\n", at);
            }
            let verdict = bad.map_or(u64::MAX, |at| at as u64).to_le_bytes();
            post_send(&l, &verdict, 4, 0, 0)?;
            complete(&l.cq, [4])?;
            // The client's farewell ends the case, so that the regions
            // stay registered while the client may still read them.
            farewell(&l, true)?;
            assert!(bad.is_none());
            drop(wmr);
            drop(rmr);
            drop(l);
            // The regions outlive their registrations.
            drop(w);
            drop(r);
            return Ok(());
        }
        post_recv(&l, &mut keys, 1)?;
        complete(&l.cq, [1])?;
        let mut k = [0u8; 8];
        k.copy_from_slice(&keys[..8]);
        let wkey = u64::from_le_bytes(k);
        k.copy_from_slice(&keys[8..]);
        let rkey = u64::from_le_bytes(k);
        let mut srcs = KVec::new();
        for (i, &(_, len)) in WRITES.iter().enumerate() {
            srcs.push(pattern(len, i as u32)?, GFP_KERNEL)?;
        }
        for (i, (&(off, _), src)) in WRITES.iter().zip(srcs.iter()).enumerate() {
            let v = kvec(src);
            let flags = if i % 2 == 0 {
                sys::KFI_DELIVERY_COMPLETE
            } else {
                0
            };
            post_rma(&l, false, &v, WBASE + off as u64, wkey, 10 + i, flags)?;
        }
        complete(&l.cq, [10, 11, 12, 13])?;
        // Read back what was written, then the server's own data in two
        // reads split at an odd offset.
        let mut back = filled(REGION, 0)?;
        let v = kvec_mut(&mut back);
        post_rma(&l, true, &v, WBASE, wkey, 20, 0)?;
        let mut got = filled(REGION, 0)?;
        let (a, b) = got.split_at_mut(12_345);
        let (va, vb) = (kvec_mut(a), kvec_mut(b));
        post_rma(&l, true, &va, RBASE, rkey, 21, 0)?;
        post_rma(&l, true, &vb, RBASE + 12_345, rkey, 22, 0)?;
        complete(&l.cq, [20, 21, 22])?;
        let back_bad = written_bad(&back);
        let read_bad = first_bad(&got, RSEED, 0);
        if back_bad.is_some() || read_bad.is_some() {
            pr_err!(
                "kfi_twohost: read back: wrong byte at {:?}; read: wrong byte at {:?}\n",
                back_bad,
                read_bad
            );
        }
        // Tell the server the writes are in, get its verdict, say done.
        let mut verdict = [0u8; 8];
        post_recv(&l, &mut verdict, 30)?;
        post_send(&l, b"written!", 31, 0, 0)?;
        complete(&l.cq, [30, 31])?;
        farewell(&l, false)?;
        assert_eq!(u64::from_le_bytes(verdict), u64::MAX);
        assert!(back_bad.is_none());
        assert!(read_bad.is_none());
        drop(l);
        Ok(())
    }

    /// A peer's bad RMA requests across the wire: a wrong key, out of
    /// bounds, against the region's rights. Each fails at the client
    /// with its error, the connection still carries a good write, and
    /// the server's regions hold exactly that write (checked by the
    /// server once the client is done).
    #[test]
    fn rma_errors_across_the_wire() -> Result {
        const LEN: usize = 4096;
        let l = link(2, 16)?;
        let mut keys = [0u8; 24];
        if role()? == Role::Server {
            let mut rw = filled(LEN, 0xaa)?;
            let mut ro = filled(LEN, 0xbb)?;
            let mut wo = filled(LEN, 0xcc)?;
            let rw_mr = mr(&l, &mut rw, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0)?;
            let ro_mr = mr(&l, &mut ro, sys::KFI_REMOTE_READ, 0)?;
            let wo_mr = mr(&l, &mut wo, sys::KFI_REMOTE_WRITE, 0)?;
            for (i, m) in [&rw_mr, &ro_mr, &wo_mr].iter().enumerate() {
                keys[i * 8..i * 8 + 8].copy_from_slice(&key(m).to_le_bytes());
            }
            post_send(&l, &keys, 1, 0, 0)?;
            complete(&l.cq, [1])?;
            farewell(&l, true)?;
            drop((rw_mr, ro_mr, wo_mr));
            drop(l);
            assert!(rw[..8].iter().all(|&x| x == 0xaa));
            assert!(rw[8..72].iter().all(|&x| x == 0x55));
            assert!(rw[72..].iter().all(|&x| x == 0xaa));
            assert!(ro.iter().all(|&x| x == 0xbb) && wo.iter().all(|&x| x == 0xcc));
            return Ok(());
        }
        post_recv(&l, &mut keys, 1)?;
        complete(&l.cq, [1])?;
        let k = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&keys[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        let (krw, kro, kwo) = (k(0), k(1), k(2));
        let data = [0x55u8; 64];
        let mut back = filled(LEN, 0)?;
        // (read, remote address, key, the error)
        let cases = [
            (false, 0, krw ^ 0x5a5a_0000, ENOKEY),
            (false, LEN as u64 - 63, krw, ERANGE),
            (true, u64::MAX - 10, krw, ERANGE),
            (false, 0, kro, EACCES),
            (true, 0, kwo, EACCES),
        ];
        for (i, &(read, addr, key, err)) in cases.iter().enumerate() {
            let v = if read {
                kvec_mut(&mut back[..64])
            } else {
                kvec(&data)
            };
            post_rma(&l, read, &v, addr, key, 10 + i, 0)?;
            let e = complete_err(&l.cq)?;
            assert_eq!((e.op_context as usize, e.err), (10 + i, -err.to_errno()));
        }
        assert!(back.iter().all(|&x| x == 0));
        // The connection still works: a good write, read back whole.
        post_rma(&l, false, &kvec(&data), 8, krw, 20, 0)?;
        complete(&l.cq, [20])?;
        post_rma(&l, true, &kvec_mut(&mut back), 0, krw, 21, 0)?;
        complete(&l.cq, [21])?;
        farewell(&l, false)?;
        assert!(back[..8].iter().all(|&x| x == 0xaa));
        assert!(back[8..72] == data[..]);
        assert!(back[72..].iter().all(|&x| x == 0xaa));
        drop(l);
        Ok(())
    }

    /// The server goes away with messages in flight to it: at the
    /// client every send completes exactly once (done or failed), the
    /// shutdown arrives as an event, and posting fails from then on.
    #[test]
    fn peer_closes_with_sends_in_flight() -> Result {
        const SENDS: usize = 4;
        let l = link(3, 16)?;
        let mut note = [0u8; 8];
        if role()? == Role::Server {
            // Takes the client's first message only; the big ones after
            // it wait for receives that never come.
            post_recv(&l, &mut note, 1)?;
            complete(&l.cq, [1])?;
            assert_eq!(&note, b"posted!!");
            fsleep(Delta::from_millis(200));
            drop(l);
            return Ok(());
        }
        let big = pattern(1 << 20, 9)?;
        post_send(&l, b"posted!!", 1, 0, 0)?;
        for i in 0..SENDS {
            post_send(&l, &big, 10 + i, 0, 0)?;
        }
        let t0 = Instant::<Monotonic>::now();
        let (mut done, mut failed) = (0, 0);
        let mut seen = [false; SENDS + 1];
        while done + failed < SENDS + 1 {
            match next_completion(&l.cq, t0) {
                Ok(e) => {
                    let i = match e.op_context as usize {
                        1 => 0,
                        c => c
                            .checked_sub(9)
                            .filter(|&i| (1..=SENDS).contains(&i))
                            .ok_or(EPROTO)?,
                    };
                    assert!(!seen[i]);
                    seen[i] = true;
                    done += 1;
                }
                Err(e) if e == EIO => failed += 1,
                Err(e) => return Err(e),
            }
        }
        assert!(seen[0]);
        assert_eq!(next_event(&l.n, t0)?.0, sys::KFI_SHUTDOWN);
        assert!(post_send(&l, b"too late", 20, 0, 0).is_err());
        drop(l);
        Ok(())
    }
}
