// SPDX-License-Identifier: GPL-2.0

//! kfi_test_ibverbs.ko: KUnit suite `kfi_ibverbs`, kfi_ibverbs over a real
//! RDMA device. The guest script adds a soft-iWARP (`siw0`) or, with
//! `roce=1`, a soft-RoCE (`rxe0`) device on a veth end with address
//! `NODE` (tests/selftests/kfabric/rdma_link.sh) before loading this
//! module and deletes it afterwards. Written only with the safe ULP API of
//! `kfi/api/ulp`, as a Rust ULP would be.
//!
//! Covered: connection management through rdma_cm (connect with private
//! data, accept, reject, shutdown, refused connects, closes in every
//! state) and messages (every size up to the limit with every byte
//! checked, remote CQ data, truncation, inject, credit flow control with
//! messages held until their receive is posted, receives canceled at
//! close), a hostile peer (played by the client endpoint through the
//! provider's test-only `kfi_ibverbs_test_tamper`: a message that never
//! ends, a short frame inside a message, a flood of remote CQ data, a
//! bad magic, unknown flags, an acknowledgement on a data frame, tagged
//! frames of a bad length; each ends the connection with `EPROTO`),
//! tagged messages of every size, expected and unexpected, and a flood of
//! unexpected ones beyond the bound (`ENOSPC`), counters (failures counted,
//! a peer's kinds refused), atomics as the device has them
//! (rxe) or refused (siw), delivery completion of sends and writes, more
//! reads and atomics outstanding than the negotiated read depth, the
//! deadline on credits a peer does not return, and
//! the device's removal in the middle of traffic (the last case: it
//! deletes the device with the rdma tool).

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

module! {
    type: KfiTestIbverbs,
    name: "kfi_test_ibverbs",
    authors: ["kfabric developers"],
    description: "KUnit tests of kfi_ibverbs over a soft-iWARP or soft-RoCE device",
    license: "GPL",
    params: {
        roce: u32 {
            default: 0,
            description: "The device is rxe0 (RoCE), not siw0 (iWARP)",
        },
    },
}

/// The device under test: (name, fabric).
fn device() -> (&'static core::ffi::CStr, &'static core::ffi::CStr) {
    if module_parameters::roce.value() != 0 {
        (c"rxe0", c"RoCE")
    } else {
        (c"siw0", c"iWARP")
    }
}

struct KfiTestIbverbs;

extern "C" {
    /// kfi_ibverbs' test-only path (prov/ibverbs/frame.rs): the next
    /// `frames` data frames its endpoints send get header flags `set`
    /// added and `clear` removed, and magic `magic` unless 0.
    fn kfi_ibverbs_test_tamper(set: u32, clear: u32, magic: u32, frames: u32);
}

/// Makes the next `frames` data frames of kfi_ibverbs' endpoints a
/// hostile peer's (see [`kfi_ibverbs_test_tamper`]); 0 stops it.
fn tamper(set: u32, magic: u32, frames: u32) {
    // SAFETY: Only stores the values; any values are valid.
    unsafe { kfi_ibverbs_test_tamper(set, 0, magic, frames) }
}

impl kernel::Module for KfiTestIbverbs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}

#[kunit_tests(kfi_ibverbs)]
mod tests {
    use super::kfi::{
        kfi_sys as sys,
        ulp::{CmEvent, Cq, CqError, Domain, Endpoint, Eq, Fabric, Hints},
    };
    use super::{device, tamper};
    use core::ffi::CStr;
    use kernel::prelude::*;

    /// The address of the RDMA device (`RDMA_LINK_ADDR` of rdma_link.sh).
    const NODE: &CStr = c"10.99.0.1";

    /// Longest wait for an event: connection setup on siw under TCG takes
    /// well under a second; the margin absorbs a loaded host.
    const WAIT_MS: i32 = 20_000;

    /// The ibverbs entries for [`NODE`] at `port` (as source, to listen
    /// and to open the domain, and as destination) and their fabric.
    struct Side {
        src: super::kfi::kfabric::InfoList,
        dst: super::kfi::kfabric::InfoList,
        fabric: Fabric,
    }

    fn side(port: &CStr) -> Result<Side> {
        let hints = Hints::provider(c"ibverbs")?;
        let src = hints.getinfo(NODE, port, sys::KFI_SOURCE)?;
        let dst = hints.getinfo(NODE, port, 0)?;
        let fabric = Fabric::open(src.entry())?;
        Ok(Side { src, dst, fabric })
    }

    /// `r`, with the failing step named in the log.
    fn step<T>(what: &str, r: Result<T>) -> Result<T> {
        r.inspect_err(|e| pr_err!("kfi_ibverbs test: {what}: {e:?}\n"))
    }

    fn endpoint<'a>(
        d: &'a Domain<'_>,
        info: &sys::kfi_info,
        cq: &'a Cq<'_>,
        eq: &'a Eq<'_>,
    ) -> Result<Endpoint<'a>> {
        let ep = d.endpoint(info)?;
        ep.bind_cq(cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
        ep.bind_eq(eq)?;
        ep.enable()?;
        Ok(ep)
    }

    #[test]
    fn getinfo_names_the_device() -> Result {
        let s = side(c"7610")?;
        let e = s.src.entry();
        // SAFETY: An entry from getinfo has valid attributes and strings.
        let (fabric, domain, ep_type) = unsafe {
            (
                CStr::from_char_ptr((*e.fabric_attr).name),
                CStr::from_char_ptr((*e.domain_attr).name),
                (*e.ep_attr).type_,
            )
        };
        assert_eq!((domain, fabric), device());
        assert_eq!(ep_type, sys::KFI_EP_MSG);
        let d = s.fabric.domain(e)?;
        drop(d);
        Ok(())
    }

    #[test]
    fn connect_accept_with_private_data() -> Result {
        let s = step("side", side(c"7611"))?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let _pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        step("connect", cep.connect(b"hello from the client"))?;
        let CmEvent::ConnReq { req, data } = step("connreq", eq.sread(WAIT_MS))? else {
            return Err(EPROTO);
        };
        assert_eq!(data.as_bytes(), b"hello from the client");
        let sep = endpoint(&d, req.info(), &scq, &eq)?;
        drop(req);
        sep.accept(b"welcome")?;
        let (mut client_data, mut server_seen) = (false, false);
        for _ in 0..2 {
            let CmEvent::Connected { fid, data } = eq.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            if cep.is(fid) {
                assert_eq!(data.as_bytes(), b"welcome");
                client_data = true;
            } else {
                assert!(sep.is(fid));
                server_seen = true;
            }
        }
        assert!(client_data && server_seen);
        // Both ends learn of the shutdown.
        cep.shutdown()?;
        let mut ends = 0;
        for _ in 0..2 {
            let CmEvent::Shutdown { fid } = eq.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            assert!(cep.is(fid) || sep.is(fid));
            ends += 1;
        }
        assert_eq!(ends, 2);
        // A second shutdown has no connection left.
        assert_eq!(cep.shutdown(), Err(ENOTCONN));
        Ok(())
    }

    #[test]
    fn reject_carries_private_data() -> Result {
        let s = side(c"7612")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let ccq = d.cq(16)?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(b"may I")?;
        let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        pep.reject(&req, b"no room")?;
        // The handle is answered: a second answer is refused.
        assert_eq!(pep.reject(&req, b"again"), Err(EINVAL));
        let CmEvent::Failed { fid, err, data } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert!(cep.is(fid));
        assert_eq!(err, ECONNREFUSED);
        assert_eq!(data.as_bytes(), b"no room");
        Ok(())
    }

    #[test]
    fn connect_to_nobody_fails_in_time() -> Result {
        let s = side(c"7613")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let ccq = d.cq(16)?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        let CmEvent::Failed { fid, err, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert!(cep.is(fid));
        assert!(err == ECONNREFUSED || err == ECONNRESET || err == EHOSTUNREACH);
        // Connecting again on a failed endpoint is refused.
        assert_eq!(cep.connect(&[]), Err(EISCONN));
        Ok(())
    }

    #[test]
    fn closes_in_every_state() -> Result {
        let s = side(c"7614")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let ccq = d.cq(16)?;
        // Opened, never enabled; enabled, never connected.
        drop(d.endpoint(s.dst.entry())?);
        drop(endpoint(&d, s.dst.entry(), &ccq, &eq)?);
        // A request the ULP never answers: closed with its listener.
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        drop(req);
        drop(pep);
        drop(cep);
        // A connecting endpoint closed before the answer.
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        drop(cep);
        drop(pep);
        // Enabling twice is refused.
        let ep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        assert_eq!(ep.enable(), Err(EINVAL));
        Ok(())
    }

    /// The server side of a connect: waits for the request (its data must
    /// be `want`), opens and accepts its endpoint, and waits until both
    /// ends are connected.
    fn serve<'a>(
        d: &'a Domain<'_>,
        eq: &'a Eq<'_>,
        cq: &'a Cq<'_>,
        want: &[u8],
    ) -> Result<Endpoint<'a>> {
        let CmEvent::ConnReq { req, data } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert_eq!(data.as_bytes(), want);
        let sep = endpoint(d, req.info(), cq, eq)?;
        drop(req);
        sep.accept(&[])?;
        for _ in 0..2 {
            let CmEvent::Connected { .. } = eq.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
        }
        Ok(sep)
    }

    /// Connects a client and a server endpoint on one domain and runs `f`
    /// with (client, server, client CQ, server CQ).
    fn with_pair(
        port: &CStr,
        f: impl FnOnce(&Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>) -> Result,
    ) -> Result {
        with_pair_domain(port, |_, cep, sep, ccq, scq| f(cep, sep, ccq, scq))
    }

    /// As [`with_pair`], with the domain both endpoints are on.
    fn with_pair_domain(
        port: &CStr,
        f: impl FnOnce(&Domain<'_>, &Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>) -> Result,
    ) -> Result {
        let s = step("side", side(port))?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(128)?, d.cq(128)?);
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        cep.connect(&[])?;
        let sep = serve(&d, &eq, &scq, &[])?;
        f(&d, &cep, &sep, &ccq, &scq)
    }

    /// `len` bytes of a pattern that differs per `seed`.
    fn pattern(len: usize, seed: u32) -> Result<KVVec<u8>> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        for _ in 0..len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.push((x >> 16) as u8, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn zeroed(len: usize) -> Result<KVVec<u8>> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
        v.resize(len, 0xee, GFP_KERNEL)?;
        Ok(v)
    }

    /// The longest message the provider advertises.
    fn max_msg() -> Result<usize> {
        let s = side(c"7619")?;
        // SAFETY: An entry from getinfo has valid endpoint attributes.
        Ok(unsafe { (*s.src.entry().ep_attr).max_msg_size })
    }

    #[test]
    fn messages_of_every_size_with_cq_data() -> Result {
        let max = max_msg()?;
        assert!(max >= 1024);
        with_pair(c"7615", |cep, sep, ccq, scq| {
            // Around one frame's payload (4080 B), several frames, the
            // longest.
            let sizes = [0, 1, 7, 100, 4079, 4080, 4081, 12245, max];
            for (i, &len) in sizes.iter().enumerate() {
                let src = pattern(len, i as u32)?;
                let mut dst = zeroed(len + 8)?;
                // SAFETY: The buffers outlive the completions read below.
                unsafe {
                    sep.recv(&mut dst, 100 + i)?;
                    cep.send_data(&src, 200 + i, 0x1000 + i as u64, 0)?;
                }
                let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                assert_eq!(c.context, 200 + i);
                assert!(c.flags & sys::KFI_SEND != 0);
                let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
                assert_eq!(
                    (r.context, r.len, r.data),
                    (100 + i, len, 0x1000 + i as u64)
                );
                assert!(r.flags & sys::KFI_RECV != 0 && r.flags & sys::KFI_REMOTE_CQ_DATA != 0);
                assert!(dst[..len] == src[..]);
                assert!(dst[len..].iter().all(|&b| b == 0xee));
            }
            // Above the limit: refused at the call, nothing posted.
            let big = zeroed(max + 1)?;
            // SAFETY: Refused, so the buffer is not used after the call.
            assert_eq!(unsafe { cep.send(&big, 1, 0) }, Err(EMSGSIZE));
            Ok(())
        })
    }

    #[test]
    fn truncation_and_inject() -> Result {
        with_pair(c"7616", |cep, sep, ccq, scq| {
            let mut small = [0u8; 3];
            let mut r = [0u8; 8];
            let mut inj = *b"inject!!";
            // SAFETY: The buffers outlive the completions read below; an
            // inject's buffer is only needed for the call.
            unsafe {
                sep.recv(&mut small, 1)?;
                cep.send(b"truncated", 2, 0)?;
            }
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context, err, olen, ..
                }) => {
                    assert_eq!((context, olen), (1, 6));
                    assert_eq!(err, EMSGSIZE);
                }
                _ => return Err(EPROTO),
            }
            assert_eq!(&small, b"tru");
            assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 2);
            // SAFETY: `r` outlives the receive read below; an inject is copied
            // at the call.
            unsafe {
                sep.recv(&mut r, 3)?;
                cep.send(&inj, 0, sys::KFI_INJECT)?;
            }
            inj.fill(0);
            assert_eq!(scq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 3);
            assert_eq!(&r, b"inject!!");
            // An inject completes nothing.
            assert!(matches!(ccq.read(), Err(CqError::Queue(e)) if e == EAGAIN));
            Ok(())
        })
    }

    #[test]
    fn flow_control_holds_messages_until_received() -> Result {
        with_pair(c"7617", |cep, sep, ccq, scq| {
            // Nothing posted on the server: the client may send until the
            // server's slots are all used, then waits for credits.
            let msgs = pattern(64 * 200, 7)?;
            let mut sent = 0usize;
            let mut refused = false;
            while sent < 200 {
                let m = &msgs[sent * 64..(sent + 1) * 64];
                // SAFETY: `msgs` outlives every completion read below.
                match unsafe { cep.send(m, sent, 0) } {
                    Ok(()) => sent += 1,
                    Err(e) if e == EAGAIN => {
                        refused = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            assert!(refused && sent > 0 && sent < 200);
            let mut got = KVec::with_capacity(200, GFP_KERNEL)?;
            got.resize(200, [0u8; 64], GFP_KERNEL)?;
            let mut received = 0usize;
            let mut next_send = sent;
            let mut send_done = 0usize;
            // Posting receives delivers the held messages in order and
            // returns credits, so the rest can go.
            while received < 200 {
                if received < next_send {
                    // SAFETY: `got` outlives the completions read below.
                    unsafe { sep.recv(&mut got[received], received)? };
                    let c = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
                    assert_eq!((c.context, c.len), (received, 64));
                    received += 1;
                }
                while ccq.read().is_ok() {
                    send_done += 1;
                }
                while next_send < 200 {
                    let m = &msgs[next_send * 64..(next_send + 1) * 64];
                    // SAFETY: `msgs` outlives the test case, so every send's completion.
                    match unsafe { cep.send(m, next_send, 0) } {
                        Ok(()) => next_send += 1,
                        Err(e) if e == EAGAIN => break,
                        Err(e) => return Err(e),
                    }
                }
            }
            while send_done < 200 {
                ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                send_done += 1;
            }
            for (i, g) in got.iter().enumerate() {
                assert!(g[..] == msgs[i * 64..(i + 1) * 64]);
            }
            Ok(())
        })
    }

    #[test]
    fn receives_canceled_at_close_and_shutdown() -> Result {
        let s = side(c"7618")?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
        let mut buf = [0u8; 16];
        let mut buf2 = [0u8; 16];
        {
            let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
            // A receive posted before the connection exists is kept.
            // SAFETY: `buf` outlives the completion read below.
            unsafe { cep.recv(&mut buf, 7)? };
            cep.connect(&[])?;
            let sep = serve(&d, &eq, &scq, &[])?;
            // The early receive takes the first message.
            // SAFETY: The static message and `buf` outlive the completions read below.
            unsafe {
                sep.send(b"early receive ok", 8, 0)?;
                sep.recv(&mut buf2, 9)?;
            }
            let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!((c.context, c.len), (7, 16));
            assert_eq!(&buf, b"early receive ok");
            // The peer shuts down: the server's posted receive is canceled.
            cep.shutdown()?;
            let mut canceled = false;
            for _ in 0..3 {
                match scq.sread(WAIT_MS) {
                    Err(CqError::Failed {
                        context: 9, err, ..
                    }) => {
                        assert_eq!(err, ECANCELED);
                        canceled = true;
                        break;
                    }
                    Ok(c) if c.context == 8 => {}
                    _ => return Err(EPROTO),
                }
            }
            assert!(canceled);
            // A receive on the closing endpoint is canceled at its close.
            // SAFETY: `buf` outlives the endpoint, whose close completes the receive.
            unsafe { cep.recv(&mut buf, 10)? };
        }
        match ccq.sread(WAIT_MS) {
            Err(CqError::Failed {
                context: 10, err, ..
            }) => assert_eq!(err, ECANCELED),
            _ => return Err(EPROTO),
        }
        Ok(())
    }

    #[test]
    fn cancel_takes_back_a_receive() -> Result {
        with_pair(c"7621", |cep, sep, _ccq, scq| {
            let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
            // SAFETY: The buffers outlive the completions read below (the
            // canceled one completes at the cancel).
            unsafe { sep.recv(&mut a, 5)? };
            sep.cancel(5)?;
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context: 5, err, ..
                }) => assert_eq!(err, ECANCELED),
                _ => return Err(EPROTO),
            }
            assert_eq!(sep.cancel(5), Err(ENOENT));
            // The next message goes to the next receive, not the canceled.
            // SAFETY: `b` and the static message outlive the completions read below.
            unsafe {
                sep.recv(&mut b, 6)?;
                cep.send(b"after!!!", 7, 0)?;
            }
            assert_eq!(scq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 6);
            assert_eq!((&b, a), (b"after!!!", [0u8; 8]));
            Ok(())
        })
    }

    #[test]
    fn connect_to_an_explicit_address() -> Result {
        let s = side(c"7622")?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
        // An endpoint of the source entry has no destination of its own.
        let cep = endpoint(&d, s.src.entry(), &ccq, &eq)?;
        assert_eq!(cep.connect(&[]), Err(EINVAL));
        let e = s.dst.entry();
        // SAFETY: A destination entry holds `dest_addrlen` address bytes.
        let to = unsafe { core::slice::from_raw_parts(e.dest_addr.cast::<u8>(), e.dest_addrlen) };
        assert_eq!(cep.connect_to(&to[..4], &[]), Err(EINVAL));
        cep.connect_to(to, b"explicit")?;
        let _sep = serve(&d, &eq, &scq, b"explicit")?;
        Ok(())
    }

    /// Runs `rdma link delete DEVICE` (the guest's rdma tool) and waits
    /// for it: the device goes away under the provider.
    fn delete_device() -> Result {
        let path = c"/usr/bin/rdma";
        let argv = [
            path.as_char_ptr().cast_mut(),
            c"link".as_char_ptr().cast_mut(),
            c"delete".as_char_ptr().cast_mut(),
            device().0.as_char_ptr().cast_mut(),
            core::ptr::null_mut(),
        ];
        let envp = [
            c"PATH=/usr/sbin:/usr/bin:/sbin:/bin"
                .as_char_ptr()
                .cast_mut(),
            core::ptr::null_mut(),
        ];
        // SAFETY: NUL-terminated strings and NULL-terminated arrays that
        // live until the helper has run (UMH_WAIT_PROC).
        let r = unsafe {
            kernel::bindings::call_usermodehelper(
                path.as_char_ptr(),
                argv.as_ptr().cast_mut(),
                envp.as_ptr().cast_mut(),
                kernel::bindings::UMH_WAIT_PROC as i32,
            )
        };
        if r != 0 {
            pr_err!("kfi_ibverbs test: rdma link delete: {r}\n");
            return Err(EIO);
        }
        Ok(())
    }

    // Must stay the last case: the device is gone afterwards.
    /// `len` bytes of `buf` at its virtual address: the RMA address of a
    /// region on this provider (`KFI_MR_VIRT_ADDR`).
    fn addr_of(buf: &[u8], offset: usize) -> u64 {
        (buf.as_ptr() as u64).wrapping_add(offset as u64)
    }

    /// A domain registers before its first connection (over its own
    /// registration link) and after it; RDMA reads and writes go through
    /// either region with the device checking rights, and a write with
    /// remote CQ data completes at the target after the data is placed. A
    /// domain that only registered closes cleanly.
    #[test]
    fn regions_take_rdma_before_and_after_connecting() -> Result {
        let s = side(c"7621")?;
        {
            let lone = s.fabric.domain(s.src.entry())?;
            let (mut b0, mut b1) = (zeroed(4096)?, zeroed(8192)?);
            let a = lone.register(&mut b0, sys::KFI_REMOTE_WRITE, 0)?;
            let c = lone.register(&mut b1[100..], sys::KFI_REMOTE_READ, 0)?;
            assert_ne!(a.key(), c.key());
        }
        let d = s.fabric.domain(s.src.entry())?;
        let mut early = zeroed(4096)?;
        let early_at = addr_of(&early, 0);
        let early_mr = d.register(&mut early, sys::KFI_REMOTE_WRITE, 0)?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(64)?, d.cq(64)?);
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        cep.connect(&[])?;
        let sep = serve(&d, &eq, &scq, &[])?;
        // 10 pages, not page-aligned: the region covers 11.
        let mut target = zeroed(10 * 4096 + 100)?;
        let base = addr_of(&target, 100);
        let t = &mut target[100..];
        let mr = d.register(t, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0)?;
        let src = pattern(10 * 4096, 11)?;
        // SAFETY: The buffers outlive the completions read below.
        unsafe { cep.write(&src[..5000], base + 3, mr.key(), 1, 0)? };
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 1);
        let mut back = zeroed(5000)?;
        // SAFETY: `back` outlives the read's completion, read just below.
        unsafe { cep.read(&mut back, base + 3, mr.key(), 2)? };
        let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
        assert_eq!((c.context, c.len), (2, 5000));
        assert!(back[..] == src[..5000]);
        // Remote CQ data: the target's completion, after the bytes.
        // SAFETY: `src` outlives the write's completion, read below.
        unsafe {
            cep.write(
                &src[..64],
                base + 40_000,
                mr.key(),
                3,
                sys::KFI_REMOTE_CQ_DATA,
            )?
        };
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 3);
        let r = scq.sread(WAIT_MS).map_err(|e| e.errno())?;
        assert!(r.flags & sys::KFI_REMOTE_WRITE != 0);
        // The region registered before any connection takes a write.
        // SAFETY: `src` outlives the write's completion, read below.
        unsafe { cep.write(&src[..4096], early_at, early_mr.key(), 4, 0)? };
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 4);
        // Read back through the later region's connection: the write was
        // placed (iWARP acknowledges writes only by what follows them).
        let mut probe = zeroed(8)?;
        // SAFETY: `probe` outlives the read's completion, read below.
        unsafe { cep.read(&mut probe, base + 3, mr.key(), 5)? };
        assert_eq!(ccq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 5);
        drop(sep);
        drop(mr);
        drop(early_mr);
        assert!(early[..] == src[..4096]);
        assert!(target[103..5103] == src[..5000]);
        assert!(target[40_100..40_164] == src[..64]);
        assert!(target[..103].iter().all(|&b| b == 0xee));
        Ok(())
    }

    /// A write into a read-only region fails at the device: nothing is
    /// written, and (RDMA semantics) the connection is over: what follows
    /// flushes or is refused.
    #[test]
    fn rma_access_error_ends_the_connection() -> Result {
        with_pair_domain(c"7622", |d, cep, _sep, ccq, _scq| {
            let mut ro = zeroed(4096)?;
            let at = addr_of(&ro, 0);
            let mr = d.register(&mut ro, sys::KFI_REMOTE_READ, 0)?;
            let data = pattern(64, 3)?;
            // SAFETY: The buffers outlive the completions read below.
            unsafe { cep.write(&data, at, mr.key(), 1, 0)? };
            // RoCE and InfiniBand report the write failed (the target's
            // NAK); iWARP acknowledges no write, so its write completes
            // once sent and the error shows as the end of the connection.
            match ccq.sread(WAIT_MS) {
                Err(CqError::Failed { context, err, .. }) => {
                    assert_eq!(context, 1);
                    assert!(err == EACCES || err == EIO);
                }
                Ok(c) if c.context == 1 => {}
                _ => return Err(EPROTO),
            }
            let mut back = [0u8; 8];
            // SAFETY: `back` outlives the read's completion, read below if posted.
            if unsafe { cep.read(&mut back, at, mr.key(), 2) }.is_ok() {
                assert!(matches!(ccq.sread(WAIT_MS), Err(CqError::Failed { .. })));
            }
            drop(mr);
            assert!(ro.iter().all(|&b| b == 0xee));
            Ok(())
        })
    }

    /// A counter counts what the endpoint completes, errors included: a
    /// write into a read-only region counts as an error where the device
    /// reports it (RoCE), as a success where it cannot (iWARP writes are
    /// not acknowledged). A peer's one-sided accesses never reach the
    /// provider, so counters for them are refused (`EOPNOTSUPP`), and a
    /// counter for no kind is `EINVAL`.
    #[test]
    fn counters_count_failures_and_refuse_a_peers_kinds() -> Result {
        let s = step("side", side(c"7637"))?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
        let writes = d.cntr()?;
        let cep = d.endpoint(s.dst.entry())?;
        cep.bind_cq(&ccq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
        cep.bind_eq(&eq)?;
        assert_eq!(
            cep.bind_cntr(&writes, sys::KFI_REMOTE_WRITE),
            Err(EOPNOTSUPP)
        );
        assert_eq!(
            cep.bind_cntr(&writes, sys::KFI_REMOTE_READ),
            Err(EOPNOTSUPP)
        );
        assert_eq!(cep.bind_cntr(&writes, 0), Err(EINVAL));
        step("bind", cep.bind_cntr(&writes, sys::KFI_WRITE))?;
        cep.enable()?;
        cep.connect(&[])?;
        let _sep = serve(&d, &eq, &scq, &[])?;
        let mut ro = zeroed(4096)?;
        let at = addr_of(&ro, 0);
        let mr = step("register", d.register(&mut ro, sys::KFI_REMOTE_READ, 0))?;
        let data = pattern(64, 5)?;
        // SAFETY: `data` outlives the completion read below.
        step("write", unsafe { cep.write(&data, at, mr.key(), 1, 0) })?;
        let failed = match ccq.sread(WAIT_MS) {
            Err(CqError::Failed { context: 1, .. }) => true,
            Ok(c) if c.context == 1 => false,
            _ => return Err(EPROTO),
        };
        assert_eq!(
            (writes.read(), writes.errors()),
            (u64::from(!failed), u64::from(failed))
        );
        drop(mr);
        assert!(ro.iter().all(|&b| b == 0xee));
        Ok(())
    }

    /// Whether the device under test has atomics: rxe does, siw not.
    fn device_has_atomics() -> bool {
        device().0 == c"rxe0"
    }

    /// Atomics as the device has them: advertised (`KFI_ATOMIC`) and
    /// working on rxe, with the device's rights and alignment; refused
    /// with `EOPNOTSUPP` and not advertised on siw.
    #[test]
    fn atomics_as_the_device_has_them() -> Result {
        let s = side(c"7628")?;
        let offered = s.src.entry().caps & sys::KFI_ATOMIC != 0;
        assert_eq!(offered, device_has_atomics());
        drop(s);
        with_pair_domain(c"7629", |d, cep, _sep, ccq, _scq| {
            let mut words = zeroed(16)?;
            words[..8].copy_from_slice(&40u64.to_ne_bytes());
            let at = addr_of(&words, 0);
            let mr = d.register(&mut words, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0)?;
            let mut old = 0u64;
            // SAFETY: The operand and result outlive the completion.
            let r = unsafe { cep.fetch_atomic_u64(sys::KFI_SUM, &2, &mut old, at, mr.key(), 1) };
            if !device_has_atomics() {
                assert_eq!(r, Err(EOPNOTSUPP));
                drop(mr);
                assert_eq!(words[..8], 40u64.to_ne_bytes());
                return Ok(());
            }
            r?;
            let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            assert_eq!(c.context, 1);
            assert_eq!(
                c.flags & (sys::KFI_ATOMIC | sys::KFI_READ),
                sys::KFI_ATOMIC | sys::KFI_READ
            );
            assert_eq!(old, 40);
            // What the device cannot do is refused at the call.
            // SAFETY: Refused, so nothing is used after the calls.
            unsafe {
                assert_eq!(
                    cep.fetch_atomic_u64(sys::KFI_MIN, &1, &mut old, at, mr.key(), 2),
                    Err(EOPNOTSUPP)
                );
                assert_eq!(
                    cep.fetch_atomic_u64(sys::KFI_SUM, &1, &mut old, at + 4, mr.key(), 3),
                    Err(EINVAL)
                );
            }
            // A region without the read right takes no atomic (every
            // device atomic returns the old value): the device refuses
            // it, which ends the connection.
            let mut wo = zeroed(8)?;
            let wat = addr_of(&wo, 0);
            let wmr = d.register(&mut wo, sys::KFI_REMOTE_WRITE, 0)?;
            // SAFETY: `old` outlives the atomic's completion, read just below.
            unsafe { cep.fetch_atomic_u64(sys::KFI_SUM, &1, &mut old, wat, wmr.key(), 4)? };
            match ccq.sread(WAIT_MS) {
                Err(CqError::Failed { context, err, .. }) => {
                    assert_eq!(context, 4);
                    assert!(err == EACCES || err == EIO);
                }
                _ => return Err(EPROTO),
            }
            drop(wmr);
            drop(mr);
            assert_eq!(words[..8], 42u64.to_ne_bytes());
            assert!(words[8..].iter().all(|&b| b == 0xee));
            assert!(wo.iter().all(|&b| b == 0xee));
            Ok(())
        })
    }

    /// Delivery completion: a send completes only once the peer placed it
    /// in a receive (a plain one as soon as it is sent), and a write once
    /// the flushing read after it returned, into a region without the
    /// read right too (the read moves no byte).
    #[test]
    fn delivery_completion_waits_for_placement() -> Result {
        with_pair_domain(c"7630", |d, cep, sep, ccq, scq| {
            let done = |cq: &Cq<'_>, what: &str| {
                cq.sread(WAIT_MS).map_err(|e| {
                    pr_err!("kfi_ibverbs test: {what}: {e:?}\n");
                    e.errno()
                })
            };
            // SAFETY: The buffers are static.
            step("send early", unsafe { cep.send(b"early", 1, 0) })?;
            assert_eq!(done(ccq, "early sent")?.context, 1);
            // SAFETY: The buffer is static.
            step("send for delivery", unsafe {
                cep.send(b"placed?", 2, sys::KFI_DELIVERY_COMPLETE)
            })?;
            let before = ccq.sread(500);
            if let Ok(c) = &before {
                pr_err!(
                    "kfi_ibverbs test: delivery completed early: {}\n",
                    c.context
                );
            }
            assert!(matches!(before, Err(CqError::Queue(e)) if e == ETIMEDOUT));
            let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
            // SAFETY: The buffers outlive the completions read below.
            step("post receives", unsafe {
                sep.recv(&mut a, 3).and_then(|()| sep.recv(&mut b, 4))
            })?;
            assert_eq!(done(scq, "receive 3")?.context, 3);
            assert_eq!(done(scq, "receive 4")?.context, 4);
            assert_eq!(done(ccq, "delivery completion")?.context, 2);
            assert_eq!((&a[..5], &b[..7]), (&b"early"[..], &b"placed?"[..]));
            // Writes for delivery and commit into a write-only region.
            let mut wo = zeroed(8192)?;
            let at = addr_of(&wo, 0);
            let mr = step("register", d.register(&mut wo, sys::KFI_REMOTE_WRITE, 0))?;
            let src = pattern(6000, 4)?;
            for (i, flags) in [sys::KFI_DELIVERY_COMPLETE, sys::KFI_COMMIT_COMPLETE]
                .into_iter()
                .enumerate()
            {
                // SAFETY: `src` outlives the completion.
                step("write", unsafe {
                    cep.write(&src, at + i as u64 * 100, mr.key(), 10 + i, flags)
                })?;
                assert_eq!(done(ccq, "write completion")?.context, 10 + i);
                // SAFETY: Read while the region is still registered: the
                // completion says the bytes are in place.
                let placed = unsafe {
                    core::slice::from_raw_parts((at as usize + i * 100) as *const u8, 6000)
                };
                assert!(placed == &src[..]);
            }
            drop(mr);
            Ok(())
        })
    }

    /// Many reads (and, where the device has them, atomics) outstanding
    /// at once: 24 reads of 16 KiB (4 requests each on siw, whose reads
    /// take one local piece; 1 on rxe) and on rxe 8 fetch-adds among
    /// them, all posted before any completion is read. That is more
    /// read-type requests than the connection's negotiated depth (at
    /// most 16): the provider holds the rest back and posts them as
    /// earlier ones complete. Every operation completes exactly once,
    /// with its own context, its length and flags; every byte read is the
    /// region's, and each fetch-add returns the word as the ones before
    /// it left it (RC executes them in order).
    #[test]
    fn many_reads_and_atomics_in_flight() -> Result {
        const N: usize = 24;
        const LEN: usize = 16 * 1024;
        const ADDS: usize = 8;
        const READ_CTX: usize = 100;
        const ADD_CTX: usize = 200;
        with_pair_domain(c"7638", |d, cep, _sep, ccq, _scq| {
            let want = pattern(N * LEN, 38)?;
            let mut src = pattern(N * LEN, 38)?;
            let at = addr_of(&src, 0);
            let mr = step("register", d.register(&mut src, sys::KFI_REMOTE_READ, 0))?;
            let mut words = zeroed(8)?;
            words.copy_from_slice(&40u64.to_ne_bytes());
            let wat = addr_of(&words, 0);
            let wmr = step(
                "register words",
                d.register(&mut words, sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE, 0),
            )?;
            let adds = if device_has_atomics() { ADDS } else { 0 };
            let mut dst = zeroed(N * LEN)?;
            let mut olds = [0u64; ADDS];
            let mut added = 0;
            for (i, chunk) in dst.chunks_mut(LEN).enumerate() {
                let from = at + (i * LEN) as u64;
                // SAFETY: `dst` outlives every completion, all read below.
                step("read", unsafe {
                    cep.read(chunk, from, mr.key(), READ_CTX + i)
                })?;
                if added < adds && i % 3 == 1 {
                    // SAFETY: `olds` outlives the completion, read below.
                    step("fetch-add", unsafe {
                        cep.fetch_atomic_u64(
                            sys::KFI_SUM,
                            &1,
                            &mut olds[added],
                            wat,
                            wmr.key(),
                            ADD_CTX + added,
                        )
                    })?;
                    added += 1;
                }
            }
            assert_eq!(added, adds);
            let (mut reads_seen, mut adds_seen) = ([false; N], [false; ADDS]);
            for _ in 0..N + adds {
                let c = ccq.sread(WAIT_MS).map_err(|e| {
                    pr_err!("kfi_ibverbs test: read or atomic completion: {e:?}\n");
                    e.errno()
                })?;
                if let Some(i) = c.context.checked_sub(READ_CTX).filter(|&i| i < N) {
                    assert!(!reads_seen[i]);
                    reads_seen[i] = true;
                    assert_eq!(c.len, LEN);
                    assert_eq!(
                        c.flags & (sys::KFI_RMA | sys::KFI_READ | sys::KFI_ATOMIC),
                        sys::KFI_RMA | sys::KFI_READ
                    );
                } else if let Some(k) = c.context.checked_sub(ADD_CTX).filter(|&k| k < adds) {
                    assert!(!adds_seen[k]);
                    adds_seen[k] = true;
                    assert_eq!(
                        c.flags & (sys::KFI_ATOMIC | sys::KFI_READ),
                        sys::KFI_ATOMIC | sys::KFI_READ
                    );
                } else {
                    pr_err!("kfi_ibverbs test: unknown context {}\n", c.context);
                    return Err(EPROTO);
                }
            }
            // Nothing completes twice.
            assert!(matches!(ccq.sread(200), Err(CqError::Queue(e)) if e == ETIMEDOUT));
            drop(wmr);
            drop(mr);
            for (i, (got, exp)) in dst.chunks(LEN).zip(want.chunks(LEN)).enumerate() {
                if got != exp {
                    pr_err!("kfi_ibverbs test: read {i} brought other bytes\n");
                    return Err(EIO);
                }
            }
            for (k, &old) in olds[..adds].iter().enumerate() {
                assert_eq!(old, 40 + k as u64);
            }
            assert_eq!(words[..8], (40 + adds as u64).to_ne_bytes());
            Ok(())
        })
    }

    /// Acknowledgement flags on a data frame: a protocol error.
    #[test]
    fn acknowledgement_on_a_data_frame_ends_the_connection() -> Result {
        hostile_pair(c"7631", 16, |cep, sep, _ccq, _scq, eq| {
            tamper(F_ACKED, 0, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(b"acked!!!", 2, 0)? };
            expect_eproto(eq, sep)
        })
    }

    /// Credits a peer returns late but within the bound (its ULP posts
    /// receives after 2 s) are fine; credits it never returns end the
    /// connection after the provider's 5 s bound with `ETIMEDOUT` on the
    /// EQ, and the sends that waited for them fail with it.
    #[test]
    fn credits_never_returned_end_the_connection_in_time() -> Result {
        const N: usize = 40;
        hostile_pair(c"7632", 128, |cep, sep, ccq, scq, eq| {
            let msg = pattern(FRAME_MAX, 12)?;
            // 40 one-frame messages: 31 fit the peer's slots (one credit
            // is kept), the rest wait.
            for i in 0..N {
                // SAFETY: `msg` outlives every completion read below.
                unsafe { cep.send(&msg, i, 0)? };
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(2000));
            let mut bufs = KVVec::new();
            for _ in 0..N {
                bufs.push([0u8; FRAME_MAX], GFP_KERNEL)?;
            }
            for (i, b) in bufs.iter_mut().enumerate() {
                // SAFETY: `bufs` outlives the completions read below.
                unsafe { sep.recv(b, 100 + i)? };
            }
            for i in 0..N {
                assert_eq!(scq.sread(WAIT_MS).map_err(|e| e.errno())?.context, 100 + i);
            }
            for _ in 0..N {
                ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
            }
            assert!(bufs.iter().all(|b| b[..] == msg[..]));
            assert!(eq.sread(0).is_err());
            // Now the peer takes nothing any more.
            let t0 = kernel::time::Instant::<kernel::time::Monotonic>::now();
            // As many as the provider takes: how many credits the first
            // part left us depends on when the peer returned them, and a
            // full queue is EAGAIN (backpressure, not a failure).
            let mut sent = 0;
            while sent < N {
                // SAFETY: `msg` outlives the test case, so every send's completion.
                match unsafe { cep.send(&msg, 200 + sent, 0) } {
                    Ok(()) => sent += 1,
                    Err(e) if e == EAGAIN => break,
                    Err(e) => return Err(e),
                }
            }
            assert!(sent > 0);
            loop {
                match eq.sread(WAIT_MS)? {
                    CmEvent::Failed { fid, err, .. } if cep.is(fid) => {
                        assert_eq!(err, ETIMEDOUT);
                        break;
                    }
                    CmEvent::Shutdown { .. } | CmEvent::Failed { .. } => {}
                    _ => return Err(EPROTO),
                }
            }
            let ms = t0.elapsed().as_millis();
            assert!((4500..15_000).contains(&ms));
            let (mut ok, mut timed_out) = (0, 0);
            for _ in 0..sent {
                match ccq.sread(WAIT_MS) {
                    Ok(_) => ok += 1,
                    Err(CqError::Failed { err, .. }) if err == ETIMEDOUT => timed_out += 1,
                    Err(CqError::Failed { err, .. }) => assert_eq!(err, ECANCELED),
                    Err(CqError::Queue(e)) => return Err(e),
                }
            }
            assert!(ok < sent && timed_out > 0);
            Ok(())
        })
    }

    // Frame flags of prov/ibverbs/frame.rs.
    const F_CQ_DATA: u32 = 2;
    const F_MORE: u32 = 4;
    const F_RMA_DATA: u32 = 8;
    const F_ACKED: u32 = 32;
    /// The payload of a full frame.
    const FRAME_MAX: usize = 4080;

    /// Connects a pair on `port` whose server CQ has `scq_size` entries
    /// and runs `f(client, server, client CQ, server CQ, EQ)`; the client
    /// plays the hostile peer through the test-only tampering, which is
    /// stopped afterwards whatever `f` returns.
    fn hostile_pair(
        port: &CStr,
        scq_size: usize,
        f: impl FnOnce(&Endpoint<'_>, &Endpoint<'_>, &Cq<'_>, &Cq<'_>, &Eq<'_>) -> Result,
    ) -> Result {
        let s = step("side", side(port))?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(128)?, d.cq(scq_size)?);
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        cep.connect(&[])?;
        let sep = serve(&d, &eq, &scq, &[])?;
        let r = f(&cep, &sep, &ccq, &scq, &eq);
        tamper(0, 0, 0);
        r
    }

    /// Waits for the server's `EPROTO` error entry (the client's
    /// shutdown may come first).
    fn expect_eproto(eq: &Eq<'_>, sep: &Endpoint<'_>) -> Result {
        expect_end(eq, sep, EPROTO)
    }

    /// Sends `n` messages of `len` bytes from `msg`, waiting for send
    /// completions when the credits run out; stops at the first error
    /// (the connection ended).
    fn send_many(cep: &Endpoint<'_>, ccq: &Cq<'_>, msg: &[u8], n: usize) {
        let mut i = 0;
        while i < n {
            // SAFETY: `msg` outlives the test case, so every completion.
            match unsafe { cep.send(msg, 1000 + i, 0) } {
                Ok(()) => i += 1,
                Err(e) if e == EAGAIN => {
                    if ccq.sread(WAIT_MS).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// A peer whose message never ends (every frame flagged "more"):
    /// past max_msg_size the receive completes with EMSGSIZE and the
    /// connection ends with EPROTO, instead of taking frames for ever.
    #[test]
    fn endless_message_ends_the_connection() -> Result {
        let frames = max_msg()? / FRAME_MAX + 2;
        hostile_pair(c"7623", 128, |cep, sep, ccq, scq, eq| {
            let mut small = [0u8; 100];
            // SAFETY: `small` outlives the completion read below.
            unsafe { sep.recv(&mut small, 1)? };
            let msg = pattern(FRAME_MAX, 9)?;
            tamper(F_MORE, 0, frames as u32);
            send_many(cep, ccq, &msg, frames);
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context: 1, err, ..
                }) => assert_eq!(err, EMSGSIZE),
                _ => return Err(EPROTO),
            }
            assert!(small[..] == msg[..100]);
            expect_eproto(eq, sep)
        })
    }

    /// A frame flagged "more" that is not full: a protocol error, not a
    /// receive left waiting.
    #[test]
    fn short_frame_inside_a_message_ends_the_connection() -> Result {
        hostile_pair(c"7624", 16, |cep, sep, _ccq, scq, eq| {
            let mut buf = [0u8; 64];
            // SAFETY: `buf` outlives the completion read below.
            unsafe { sep.recv(&mut buf, 1)? };
            tamper(F_MORE, 0, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(b"0123456789", 2, 0)? };
            expect_eproto(eq, sep)?;
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context: 1, err, ..
                }) => assert_eq!(err, ECANCELED),
                _ => return Err(EPROTO),
            }
            Ok(())
        })
    }

    /// Remote CQ data frames with no write behind them: each is a
    /// completion the peer decides on, so one that finds the CQ full ends
    /// the connection rather than crowd out the endpoint's own.
    #[test]
    fn remote_cq_data_flood_ends_the_connection() -> Result {
        hostile_pair(c"7625", 4, |cep, sep, ccq, scq, eq| {
            tamper(F_RMA_DATA | F_CQ_DATA, 0, 64);
            send_many(cep, ccq, &[], 64);
            expect_eproto(eq, sep)?;
            // What the CQ took before are remote writes, then its overflow.
            let mut n = 0;
            for _ in 0..256 {
                match scq.read() {
                    Ok(c) => {
                        assert!(c.flags & sys::KFI_REMOTE_WRITE != 0);
                        n += 1;
                    }
                    Err(CqError::Queue(e)) if e == EAGAIN => break,
                    Err(_) => {}
                }
            }
            assert!(n < 64);
            Ok(())
        })
    }

    /// A frame with a bad magic: the connection ends (EPROTO on the EQ),
    /// it is not just dropped with its slot.
    #[test]
    fn malformed_frame_ends_the_connection() -> Result {
        hostile_pair(c"7626", 16, |cep, sep, _ccq, _scq, eq| {
            tamper(0, 0x55, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(b"garbage!", 2, 0)? };
            expect_eproto(eq, sep)
        })
    }

    /// Frame flags this provider does not know: a protocol error.
    #[test]
    fn unknown_frame_flags_end_the_connection() -> Result {
        hostile_pair(c"7627", 16, |cep, sep, _ccq, _scq, eq| {
            tamper(0x80, 0, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(b"flagged!", 2, 0)? };
            expect_eproto(eq, sep)
        })
    }

    /// The first frame of a tagged message (prov/ibverbs/frame.rs).
    const F_TAGGED: u32 = 64;
    /// Unexpected tagged messages a connection holds
    /// (prov/ibverbs/tagged.rs).
    const UNEXP_MAX: u64 = 64;

    /// Tagged messages of every size around the frames' boundaries (the
    /// first frame also carries the 16-byte tag extension), each sent
    /// once after and once before its receive is posted, with remote CQ
    /// data: every byte, the tag, the length and the flags arrive.
    #[test]
    fn tagged_messages_of_every_size() -> Result {
        with_pair(c"7633", |cep, sep, ccq, scq| {
            let sizes = [0, 1, 4063, 4064, 4065, 4080, 8144, 8145, 12245, 70000];
            for (i, &len) in sizes.iter().enumerate() {
                for early in [false, true] {
                    let src = pattern(len, i as u32)?;
                    let mut dst = zeroed(len + 8)?;
                    let tag = 0x5000 + i as u64;
                    let ctx = 100 + 2 * i + usize::from(early);
                    if !early {
                        // SAFETY: `dst` outlives the completion read below.
                        unsafe { sep.trecv(&mut dst, tag, 0, ctx)? };
                    }
                    // SAFETY: `src` outlives the completion read below.
                    unsafe { cep.tsend(&src, tag, ctx, tag + 1, sys::KFI_REMOTE_CQ_DATA)? };
                    let c = ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                    assert_eq!(c.context, ctx);
                    assert_eq!(
                        c.flags & (sys::KFI_SEND | sys::KFI_TAGGED),
                        sys::KFI_SEND | sys::KFI_TAGGED
                    );
                    if early {
                        // Held by now (it is copied as it arrives).
                        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
                        // SAFETY: `dst` outlives the completion read below.
                        unsafe { sep.trecv(&mut dst, tag, 0, ctx)? };
                    }
                    let r = step("tagged receive", scq.sread(WAIT_MS).map_err(|e| e.errno()))?;
                    assert_eq!((r.context, r.len, r.tag, r.data), (ctx, len, tag, tag + 1));
                    let want = sys::KFI_RECV | sys::KFI_TAGGED | sys::KFI_REMOTE_CQ_DATA;
                    assert_eq!(r.flags & want, want);
                    assert!(dst[..len] == src[..]);
                    assert!(dst[len..].iter().all(|&b| b == 0xee));
                }
            }
            Ok(())
        })
    }

    /// Sends `msg` tagged with each of `tags` (context: the tag), waiting
    /// for send completions while the sends queue is full.
    fn tsend_many(
        cep: &Endpoint<'_>,
        ccq: &Cq<'_>,
        msg: &[u8],
        tags: core::ops::Range<u64>,
    ) -> Result {
        for tag in tags {
            loop {
                // SAFETY: `msg` outlives the test case, so every
                // completion.
                match unsafe { cep.tsend(msg, tag, tag as usize, 0, 0) } {
                    Ok(()) => break,
                    Err(e) if e == EAGAIN => {
                        ccq.sread(WAIT_MS).map_err(|e| e.errno())?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Waits for the server's error entry `want` (the client's shutdown,
    /// or another endpoint's event, may come first).
    fn expect_end(eq: &Eq<'_>, sep: &Endpoint<'_>, want: Error) -> Result {
        for _ in 0..4 {
            match eq.sread(WAIT_MS)? {
                CmEvent::Failed { fid, err, .. } if sep.is(fid) => {
                    assert_eq!(err, want);
                    return Ok(());
                }
                CmEvent::Shutdown { .. } | CmEvent::Failed { .. } => {}
                _ => return Err(EPROTO),
            }
        }
        Err(ETIMEDOUT)
    }

    /// Tagged messages nobody receives are held up to the bound (64
    /// messages) while the connection goes on; the one beyond it ends that
    /// connection with `ENOSPC` on the EQ, and another connection of the
    /// same domain is not hurt.
    #[test]
    fn tagged_unexpected_flood_ends_the_connection() -> Result {
        let s = step("side", side(c"7634"))?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let _pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(256)?, d.cq(16)?);
        let (ccq2, scq2) = (d.cq(16)?, d.cq(16)?);
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        cep.connect(&[])?;
        let sep = serve(&d, &eq, &scq, &[])?;
        let cep2 = endpoint(&d, s.dst.entry(), &ccq2, &eq)?;
        cep2.connect(&[])?;
        let sep2 = serve(&d, &eq, &scq2, &[])?;
        let msg = pattern(100, 3)?;
        step(
            "the bound's messages",
            tsend_many(&cep, &ccq, &msg, 0..UNEXP_MAX),
        )?;
        // All held, nothing ended.
        assert!(eq.sread(1000).is_err());
        let mut got = [0u8; 100];
        // SAFETY: `got` outlives the completion read below.
        unsafe { sep.trecv(&mut got, 3, 0, 900)? };
        let r = step("a held message", scq.sread(WAIT_MS).map_err(|e| e.errno()))?;
        assert_eq!((r.context, r.tag, r.len), (900, 3, 100));
        assert!(got[..] == msg[..]);
        // Room for one more; the next is beyond the bound.
        let _ = tsend_many(&cep, &ccq, &msg, UNEXP_MAX..UNEXP_MAX + 2);
        step("ENOSPC", expect_end(&eq, &sep, ENOSPC))?;
        // SAFETY: Refused, so the buffer is not used after the call.
        assert_eq!(unsafe { sep.trecv(&mut got, 5, 0, 901) }, Err(ENOTCONN));
        // The other connection goes on.
        let mut other = [0u8; 8];
        // SAFETY: The buffers outlive the completions read below.
        unsafe {
            sep2.trecv(&mut other, 7, 0, 1)?;
            cep2.tsend(b"unharmed", 7, 2, 0, 0)?;
        }
        let r = step(
            "the other connection",
            scq2.sread(WAIT_MS).map_err(|e| e.errno()),
        )?;
        assert_eq!((r.context, r.tag), (1, 7));
        assert_eq!(&other, b"unharmed");
        Ok(())
    }

    /// A tagged first frame too short for its tag extension, and one whose
    /// declared length its frames do not have: protocol errors (EPROTO on
    /// the EQ); the tagged receive the second was arriving into is
    /// canceled.
    #[test]
    fn tagged_frame_with_a_bad_length_ends_the_connection() -> Result {
        hostile_pair(c"7635", 16, |cep, sep, _ccq, _scq, eq| {
            tamper(F_TAGGED, 0, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(b"short!!!", 2, 0)? };
            expect_eproto(eq, sep)
        })?;
        hostile_pair(c"7636", 16, |cep, sep, _ccq, scq, eq| {
            // Tag 0x77, a declared length of 100 bytes; 8 bytes follow.
            static M: [u8; 24] = [
                0x77, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, b'e', b'i', b'g', b'h', b't',
                b'!', b'!', b'!',
            ];
            let mut buf = [0u8; 128];
            // SAFETY: `buf` outlives the completion read below.
            unsafe { sep.trecv(&mut buf, 0x77, 0, 1)? };
            tamper(F_TAGGED, 0, 1);
            // SAFETY: The buffer is static.
            unsafe { cep.send(&M, 2, 0)? };
            expect_eproto(eq, sep)?;
            match scq.sread(WAIT_MS) {
                Err(CqError::Failed {
                    context: 1, err, ..
                }) => assert_eq!(err, ECANCELED),
                _ => return Err(EPROTO),
            }
            Ok(())
        })
    }

    #[test]
    fn device_removal_mid_traffic() -> Result {
        let s = side(c"7620")?;
        let d = s.fabric.domain(s.src.entry())?;
        let eq = s.fabric.eq(16)?;
        let pep = s.fabric.listen(s.src.entry(), &eq)?;
        let (ccq, scq) = (d.cq(128)?, d.cq(128)?);
        let cep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        cep.connect(&[])?;
        let sep = serve(&d, &eq, &scq, &[])?;
        // A region the client reads from while the device goes.
        let mut target = pattern(8192, 5)?;
        let at = addr_of(&target, 0);
        let mr = d.register(&mut target, sys::KFI_REMOTE_READ, 0)?;
        let mut back = zeroed(8192)?;
        // Traffic in flight: sends the server receives only partly, and
        // receives on the client that nothing will fill.
        let msg = pattern(2000, 3)?;
        let mut sbufs = KVec::with_capacity(8, GFP_KERNEL)?;
        sbufs.resize(8, [0u8; 2000], GFP_KERNEL)?;
        let mut cbufs = KVec::with_capacity(4, GFP_KERNEL)?;
        cbufs.resize(4, [0u8; 16], GFP_KERNEL)?;
        // SAFETY: Every buffer outlives the completions counted below.
        unsafe {
            for (i, b) in sbufs.iter_mut().enumerate().take(4) {
                sep.recv(b, 100 + i)?;
            }
            for (i, b) in cbufs.iter_mut().enumerate() {
                cep.recv(b, 200 + i)?;
            }
            for i in 0..12 {
                cep.send(&msg, 300 + i, 0)?;
            }
            cep.read(&mut back, at, mr.key(), 312)?;
        }
        delete_device()?;
        // Both endpoints learn that their connection ended.
        let mut ended = 0;
        while ended < 2 {
            match eq.sread(WAIT_MS)? {
                CmEvent::Shutdown { fid } => assert!(cep.is(fid) || sep.is(fid)),
                CmEvent::Failed { fid, .. } => assert!(cep.is(fid) || sep.is(fid)),
                _ => return Err(EPROTO),
            }
            ended += 1;
        }
        // Every operation completes exactly once: sends done or canceled,
        // receives filled (the server's) or canceled.
        let mut seen = [0u8; 16];
        let mut count = |cq: &Cq<'_>, base: usize| -> Result<usize> {
            let mut n = 0;
            loop {
                let ctx = match cq.read() {
                    Ok(c) => c.context,
                    Err(CqError::Failed { context, .. }) => context,
                    Err(CqError::Queue(e)) if e == EAGAIN => return Ok(n),
                    Err(e) => return Err(e.errno()),
                };
                let i = ctx.checked_sub(base).filter(|&i| i < 16).ok_or(EPROTO)?;
                seen[i] += 1;
                n += 1;
            }
        };
        // The client's receives (200..) and sends (300..) share its CQ.
        let _ = count(&scq, 100)?;
        drop(cep);
        drop(sep);
        drop(pep);
        let mut client = [0usize; 2];
        loop {
            let ctx = match ccq.read() {
                Ok(c) => c.context,
                Err(CqError::Failed { context, .. }) => context,
                Err(CqError::Queue(e)) if e == EAGAIN => break,
                Err(e) => return Err(e.errno()),
            };
            match ctx {
                200..=203 => client[0] += 1,
                300..=312 => client[1] += 1,
                _ => return Err(EPROTO),
            }
        }
        assert_eq!(client, [4, 13]);
        // The region outlived its device; it still closes.
        drop(mr);
        // The server's receives: each completed at most once (4 posted).
        assert!(seen.iter().all(|&n| n <= 1));
        assert_eq!(seen.iter().map(|&n| n as usize).sum::<usize>(), 4);
        // The device is gone from getinfo; the objects still close (at the
        // end of the scope, children first: a failed close would show as
        // an error in the kernel log and a provider that cannot unload).
        let hints = Hints::provider(c"ibverbs")?;
        assert!(hints.getinfo(NODE, c"7620", sys::KFI_SOURCE).is_err());
        Ok(())
    }
}
