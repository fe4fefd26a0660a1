// SPDX-License-Identifier: GPL-2.0

//! kfi_test_e2e.ko: the provider-agnostic end-to-end suite `kfi_e2e`.
//!
//! Every case drives a provider only through kfabric.ko's API, the way a
//! ULP does: a server side (its own fabric, domain, EQ and registered
//! memory) and a client side connect, then exchange messages, tagged
//! messages, RMA and atomics with every byte checked, and go through the
//! error paths. The provider and the server's address are module
//! parameters (kfi_test_e2e_param.c), so the next provider runs the very
//! same cases: `insmod kfi_test_e2e.ko provider=NAME server_node=ADDR`.
//! With `server_netns_pid=PID` the server side lives in that task's
//! network namespace (the veth topology of tests/guest/run-suites.sh), and
//! `client_node` is the address the client's RDM endpoints listen on.

use core::ffi::CStr;
use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;
// Shared by source inclusion; each module uses a part.
#[allow(dead_code)]
#[path = "../common/net.rs"]
mod net;
mod ops;

module! {
    type: KfiTestE2e,
    name: "kfi_test_e2e",
    authors: ["kfabric developers"],
    description: "Provider-agnostic end-to-end tests of kfabric",
    license: "GPL",
}

struct KfiTestE2e;

impl kernel::Module for KfiTestE2e {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The suite runs after init, so the namespace is held throughout.
        // SAFETY: No arguments; released in `drop`.
        kernel::error::to_result(unsafe { kfi_test_e2e_netns_get() })?;
        Ok(Self)
    }
}

impl Drop for KfiTestE2e {
    fn drop(&mut self) {
        // SAFETY: Taken in `init`; the suite's objects are all closed.
        unsafe { kfi_test_e2e_netns_put() };
    }
}

// Only a pointer to `struct net` crosses; its opaque layout trips the lint.
#[allow(improper_ctypes)]
extern "C" {
    fn kfi_test_e2e_provider() -> *const u8;
    fn kfi_test_e2e_server_node() -> *const u8;
    fn kfi_test_e2e_client_node() -> *const u8;
    fn kfi_test_e2e_port_base() -> c_int;
    fn kfi_test_e2e_netns_get() -> c_int;
    fn kfi_test_e2e_server_net() -> *mut kernel::bindings::net;
    fn kfi_test_e2e_netns_put();
    fn kfi_test_e2e_skip(reason: *const u8);
}

/// Marks the running case skipped with `reason` (what the provider under
/// test does not offer), so a case it cannot run is reported, never
/// silently passed.
fn skip(reason: &CStr) -> Result {
    // SAFETY: A NUL-terminated string, read during the call.
    unsafe { kfi_test_e2e_skip(reason.as_char_ptr().cast()) };
    Ok(())
}

/// The provider under test.
fn provider() -> &'static CStr {
    // SAFETY: A NUL-terminated module parameter that lives as long as the
    // module and is read-only after load.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_provider()) }
}

/// The address the server side listens on.
fn server_node() -> &'static CStr {
    // SAFETY: As for `provider`.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_server_node()) }
}

/// The address the client side's RDM endpoints listen on.
fn client_node() -> &'static CStr {
    // SAFETY: As for `provider`.
    unsafe { CStr::from_char_ptr(kfi_test_e2e_client_node()) }
}

/// The server side's namespace (NULL: the initial one), held by the
/// module while the suite runs.
fn server_net() -> *mut kernel::bindings::net {
    // SAFETY: No arguments.
    unsafe { kfi_test_e2e_server_net() }
}

/// The port of case `n`, as a string.
fn port(n: i32, buf: &mut [u8; 8]) -> Result<&CStr> {
    // SAFETY: Reads an int parameter.
    let p = unsafe { kfi_test_e2e_port_base() }
        .checked_add(n)
        .filter(|p| (1..65536).contains(p))
        .ok_or(EINVAL)?;
    let mut digits = [0u8; 5];
    let mut v = p as u32;
    let mut len = 0;
    while v > 0 {
        digits[len] = b'0' + (v % 10) as u8;
        v /= 10;
        len += 1;
    }
    for i in 0..len {
        buf[i] = digits[len - 1 - i];
    }
    buf[len] = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).map_err(|_| EINVAL)
}

#[kunit_tests(kfi_e2e)]
mod e2e {
    use super::{
        client_node,
        kfi::{kfabric::Owned, kfi_sys as sys},
        net::*,
        port, provider, server_net, server_node, skip,
    };
    use kernel::{bindings, prelude::*};

    /// A connected pair of endpoints, each side with its own fabric,
    /// domain, EQ and CQ. Fields drop in order: endpoints, then the
    /// listener, the CQs and the sides.
    struct Pair {
        cep: Owned<sys::kfid_ep>,
        sep: Owned<sys::kfid_ep>,
        pep: Owned<sys::kfid_pep>,
        ccq: Owned<sys::kfid_cq>,
        scq: Owned<sys::kfid_cq>,
        /// Kept open for the client endpoint.
        _c: Net,
        s: Net,
    }

    /// What the provider under test offers, as its entry for `n` says.
    struct Offers {
        caps: u64,
        op_flags: u64,
        max_msg: usize,
        mr_mode: u64,
        protocol: u32,
    }

    impl Offers {
        fn of(n: &Net) -> Self {
            let fi = n.src.first();
            // SAFETY: A valid entry with its attributes, owned by `n`.
            unsafe {
                Self {
                    caps: (*fi).caps,
                    op_flags: (*(*fi).tx_attr).op_flags,
                    max_msg: (*(*fi).ep_attr).max_msg_size,
                    mr_mode: (*(*fi).domain_attr).mr_mode,
                    protocol: (*(*fi).ep_attr).protocol,
                }
            }
        }

        fn has(&self, caps: u64) -> bool {
            self.caps & caps == caps
        }

        /// Whether the wire protocol is RDMA's (a remote access error ends
        /// the connection).
        fn rdma(&self) -> bool {
            matches!(
                self.protocol,
                sys::KFI_PROTO_RDMA_CM_IB_RC | sys::KFI_PROTO_IWARP
            )
        }

        /// The remote address of the first byte of `buf`, registered at
        /// `offset`: its virtual address where the provider says so.
        fn base(&self, buf: &[u8], offset: u64) -> u64 {
            if self.mr_mode & sys::KFI_MR_VIRT_ADDR != 0 {
                buf.as_ptr() as u64
            } else {
                offset
            }
        }
    }

    /// The server and client sides of case `case`.
    fn sides(case: i32) -> Result<(Net, Net)> {
        let mut b = [0u8; 8];
        let p = port(case, &mut b)?;
        let s = net_in(provider(), server_node(), p, server_net())?;
        let c = net_in(provider(), server_node(), p, core::ptr::null_mut())?;
        Ok((s, c))
    }

    fn pair(case: i32, cq_size: usize, format: u32) -> Result<Pair> {
        let (s, c) = sides(case)?;
        let pep = listen(&s)?;
        let ccq = cq_format(&c, cq_size, format)?;
        let scq = cq_format(&s, cq_size, format)?;
        let (cep, sep) = connect_to(&c, &s, &ccq, &scq)?;
        Ok(Pair {
            cep,
            sep,
            pep,
            ccq,
            scq,
            _c: c,
            s,
        })
    }

    /// `len` bytes of a pattern that differs per `seed`, in vmalloc memory.
    fn pattern(len: usize, seed: u8) -> Result<KVVec<u8>> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
        let mut x = u32::from(seed) | 1;
        for _ in 0..len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.push((x >> 16) as u8, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn zeroed(len: usize, fill: u8) -> Result<KVVec<u8>> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
        v.resize(len, fill, GFP_KERNEL)?;
        Ok(v)
    }

    /// Registers `buf` on the domain of `n` at remote address `offset`.
    fn mr(
        n: &Net,
        buf: &mut [u8],
        access: u64,
        offset: u64,
        flags: u64,
    ) -> Result<Owned<sys::kfid_mr>> {
        // SAFETY: An open domain; `buf` outlives the region (callers drop
        // the region first).
        Owned::open(|o| unsafe {
            sys::kfi_mr_reg(
                n.domain.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                access,
                offset,
                0,
                flags,
                o,
                core::ptr::null_mut(),
            )
        })
    }

    fn key(mr: &Owned<sys::kfid_mr>) -> u64 {
        // SAFETY: An open region.
        unsafe { (*mr.as_ptr()).key }
    }

    /// Posts an RMA write (`read` false) or read of `local` at `addr` of
    /// region `key`.
    fn rma(
        ep: &Owned<sys::kfid_ep>,
        read: bool,
        local: &[bindings::kvec],
        remote: &[sys::kfi_rma_iov],
        ctx: usize,
        flags: u64,
        data: u64,
    ) -> c_int {
        let mut m = sys::kfi_msg_rma {
            rma_iov: remote.as_ptr(),
            rma_iov_count: remote.len(),
            ..Default::default()
        };
        m.msg.iov_type = sys::KFI_KVEC;
        m.msg.__bindgen_anon_1.msg_iov = local.as_ptr();
        m.msg.iov_count = local.len();
        m.msg.context = ctx as *mut c_void;
        m.msg.data = data;
        // SAFETY: An open endpoint; the buffers outlive the completion
        // (the callers wait for it).
        unsafe {
            if read {
                sys::kfi_readmsg(ep.as_ptr(), &m, flags)
            } else {
                sys::kfi_writemsg(ep.as_ptr(), &m, flags)
            }
        }
    }

    fn riov(addr: u64, len: usize, key: u64) -> sys::kfi_rma_iov {
        sys::kfi_rma_iov { addr, len, key }
    }

    /// Starts connecting `ep` to the destination of its info.
    fn start_connect(ep: &Owned<sys::kfid_ep>) -> c_int {
        // SAFETY: An open, bound endpoint; no private data.
        unsafe { sys::kfi_connect(ep.as_ptr(), core::ptr::null(), core::ptr::null(), 0) }
    }

    /// Waits for a completion that must be an error: its entry.
    fn wait_err(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_err_entry> {
        let mut e = sys::kfi_cq_data_entry::default();
        if sread(cq, &mut e) != -(sys::KFI_EAVAIL as isize) {
            return Err(EPROTO);
        }
        let mut err = sys::kfi_cq_err_entry::default();
        // SAFETY: Open CQ, writable entry.
        if unsafe { sys::kfi_cq_readerr(cq.as_ptr(), &mut err, 0) } != 1 {
            return Err(EPROTO);
        }
        Ok(err)
    }

    /// `kfi_connect` with an explicit address: an endpoint opened for a
    /// destination nobody listens on connects to the listener's address
    /// given in the call, so only the explicit address can succeed.
    #[test]
    fn connect_to_an_explicit_address() -> Result {
        let (s, c) = sides(13)?;
        let (_, elsewhere) = sides(14)?;
        let pep = listen(&s)?;
        let ccq = cq_format(&elsewhere, 8, sys::KFI_CQ_FORMAT_DATA)?;
        let scq = cq_format(&s, 8, sys::KFI_CQ_FORMAT_DATA)?;
        let cep = endpoint(&elsewhere, elsewhere.dst.first(), &ccq)?;
        let to = c.dst.first();
        // SAFETY: An open endpoint; the address is a destination entry's,
        // read during the call; the private data is a literal.
        let r = unsafe {
            sys::kfi_connect(
                cep.as_ptr(),
                (*to).dest_addr,
                b"explicit".as_ptr().cast(),
                8,
            )
        };
        assert_eq!(r, 0);
        let (ev, buf, _) = event(&s)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        let req = cm_entry(&buf);
        let sep = endpoint(&s, req.info, &scq);
        // SAFETY: The request's info is ours to free.
        unsafe { sys::kfi_freeinfo(req.info) };
        let sep = sep?;
        // SAFETY: An open endpoint made for the request.
        let r = unsafe { sys::kfi_accept(sep.as_ptr(), core::ptr::null(), 0) };
        assert_eq!(r, 0);
        assert_eq!(event(&s)?.0, sys::KFI_CONNECTED);
        assert_eq!(event(&elsewhere)?.0, sys::KFI_CONNECTED);
        drop((cep, sep, pep));
        Ok(())
    }

    /// `kfi_cancel` takes back a posted receive and a posted tagged
    /// receive (each completes once, with `ECANCELED`), refuses what is
    /// not posted, and the next message goes to the next receive.
    #[test]
    fn cancel_posted_receives() -> Result {
        let p = pair(12, 16, sys::KFI_CQ_FORMAT_DATA)?;
        // Without tagged messages, only the plain receive is canceled.
        let tagged_too = Offers::of(&p.s).has(sys::KFI_TAGGED);
        let (mut a, mut b, mut c) = ([0u8; 8], [0u8; 8], [0u8; 8]);
        let ra = kvec_mut(&mut a);
        // SAFETY: Open endpoints; the buffers outlive the completions (the
        // canceled ones complete at their cancel).
        unsafe {
            assert_eq!(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&ra, 1, 0), 0), 0);
        }
        if tagged_too {
            assert_eq!(tagged(&p.sep, true, &mut b, 9, 0, 2), 0);
        }
        let fid = p.sep.fid();
        // SAFETY: An open endpoint; contexts are only compared.
        let cancel = |ctx: usize| unsafe { sys::kfi_cancel(fid, ctx as *mut c_void) };
        if tagged_too {
            assert_eq!(cancel(2), 0);
        }
        assert_eq!(cancel(1), 0);
        let mut seen = [false; 2];
        for _ in 0..1 + usize::from(tagged_too) {
            let e = wait_err(&p.scq)?;
            assert_eq!(e.err, -ECANCELED.to_errno());
            let i = (e.op_context as usize)
                .checked_sub(1)
                .filter(|&i| i < 2)
                .ok_or(EPROTO)?;
            assert!(!seen[i]);
            seen[i] = true;
        }
        assert_eq!(cancel(1), ENOENT.to_errno());
        assert_eq!(cancel(77), ENOENT.to_errno());
        let rc = kvec_mut(&mut c);
        // SAFETY: As above.
        unsafe {
            assert_eq!(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&rc, 3, 0), 0), 0);
            assert_eq!(
                sys::kfi_sendmsg(p.cep.as_ptr(), &msg(&kvec(b"canceled"), 4, 0), 0),
                0
            );
        }
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&p.scq, &mut e), 1);
        assert_eq!(e.op_context as usize, 3);
        assert_eq!((&c, a, b), (b"canceled", [0u8; 8], [0u8; 8]));
        Ok(())
    }

    /// Messages of 0 B, 1 B, odd sizes and 16 MiB, into two-buffer
    /// receives, with remote CQ data and delivery completion; a message
    /// too long for its receive; an inject.
    #[test]
    fn messages_of_every_size() -> Result {
        const SIZES: [usize; 6] = [0, 1, 7, 4097, 65539, 16 << 20];
        let p = pair(0, 16, sys::KFI_CQ_FORMAT_DATA)?;
        let offers = Offers::of(&p.s);
        for (i, &size) in SIZES.iter().enumerate() {
            let src = pattern(size, i as u8)?;
            if size > offers.max_msg {
                // Above the advertised maximum: refused, nothing sent.
                // SAFETY: An open endpoint; `src` lives across the call.
                let r = unsafe { sys::kfi_sendmsg(p.cep.as_ptr(), &msg(&kvec(&src), 1, 0), 0) };
                assert_eq!(r, EMSGSIZE.to_errno());
                continue;
            }
            let mut dst = zeroed(size + 8, 0xee)?;
            // Two receive buffers: the first ends in the middle.
            let (a, b) = dst.split_at_mut((size + 8) / 3);
            let r = [kvec_mut(a), kvec_mut(b)];
            let mut rm = msg(&r[0], 100 + i, 0);
            rm.iov_count = 2;
            let t = kvec(&src);
            let delivery = offers.op_flags & sys::KFI_DELIVERY_COMPLETE != 0;
            let flags = if i % 2 == 0 && delivery {
                sys::KFI_REMOTE_CQ_DATA | sys::KFI_DELIVERY_COMPLETE
            } else {
                sys::KFI_REMOTE_CQ_DATA
            };
            // SAFETY: Open endpoints; the buffers outlive the completions.
            unsafe {
                assert_eq!(sys::kfi_recvmsg(p.sep.as_ptr(), &rm, 0), 0);
                assert_eq!(
                    sys::kfi_sendmsg(p.cep.as_ptr(), &msg(&t, 200 + i, 7 + i as u64), flags),
                    0
                );
            }
            let mut e = sys::kfi_cq_data_entry::default();
            assert_eq!(sread(&p.ccq, &mut e), 1);
            assert_eq!(e.op_context as usize, 200 + i);
            if flags & sys::KFI_DELIVERY_COMPLETE != 0 {
                // Delivered means placed: the receive has completed.
                // SAFETY: Open CQ, one entry of room.
                let got = unsafe { sys::kfi_cq_read(p.scq.as_ptr(), (&raw mut e).cast(), 1) };
                assert_eq!(got, 1);
            } else {
                assert_eq!(sread(&p.scq, &mut e), 1);
            }
            assert_eq!(
                (e.op_context as usize, e.len, e.data),
                (100 + i, size, 7 + i as u64)
            );
            assert_eq!(
                e.flags & (sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA),
                sys::KFI_RECV | sys::KFI_REMOTE_CQ_DATA
            );
            assert!(dst[..size] == src[..]);
            assert!(dst[size..].iter().all(|&x| x == 0xee));
        }
        // Too long: what fits arrives, the rest is reported as truncated.
        let mut small = [0u8; 3];
        let sr = kvec_mut(&mut small);
        // SAFETY: As above.
        unsafe {
            assert_eq!(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&sr, 1, 0), 0), 0);
            assert_eq!(
                sys::kfi_sendmsg(p.cep.as_ptr(), &msg(&kvec(b"truncated"), 2, 0), 0),
                0
            );
        }
        let err = wait_err(&p.scq)?;
        assert_eq!((err.op_context as usize, err.len, err.olen), (1, 3, 6));
        assert_eq!(err.err, -EMSGSIZE.to_errno());
        assert_eq!(&small, b"tru");
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&p.ccq, &mut e), 1);
        // An inject: the buffer is reusable on return, no completion.
        let mut r = [0u8; 8];
        let rk = kvec_mut(&mut r);
        let mut inj = *b"inject!!";
        // SAFETY: As above; the inject's buffer is only needed for the call.
        unsafe {
            assert_eq!(sys::kfi_recvmsg(p.sep.as_ptr(), &msg(&rk, 3, 0), 0), 0);
            assert_eq!(
                sys::kfi_sendmsg(p.cep.as_ptr(), &msg(&kvec(&inj), 0, 0), sys::KFI_INJECT),
                0
            );
        }
        inj.fill(0);
        assert_eq!(sread(&p.scq, &mut e), 1);
        assert_eq!(&r, b"inject!!");
        // SAFETY: Open CQ; nothing to read.
        let none = unsafe { sys::kfi_cq_read(p.ccq.as_ptr(), (&raw mut e).cast(), 1) };
        assert_eq!(none, EAGAIN.to_errno() as isize);
        Ok(())
    }

    fn tagged(
        ep: &Owned<sys::kfid_ep>,
        recv: bool,
        buf: &mut [u8],
        tag: u64,
        ignore: u64,
        ctx: usize,
    ) -> c_int {
        let iov = kvec_mut(buf);
        let t = sys::kfi_msg_tagged {
            msg: msg(&iov, ctx, 0),
            tag,
            ignore,
        };
        // SAFETY: An open endpoint; callers keep `buf` until completion.
        unsafe {
            if recv {
                sys::kfi_trecvmsg(ep.as_ptr(), &t, 0)
            } else {
                sys::kfi_tsendmsg(ep.as_ptr(), &t, 0)
            }
        }
    }

    fn tagged_entry(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_tagged_entry> {
        let mut e = sys::kfi_cq_tagged_entry::default();
        // SAFETY: Open CQ of TAGGED format, one entry of room.
        let n = unsafe {
            sys::kfi_cq_sread(
                cq.as_ptr(),
                (&raw mut e).cast(),
                1,
                core::ptr::null(),
                WAIT_MS,
            )
        };
        if n != 1 {
            return Err(EPROTO);
        }
        Ok(e)
    }

    /// Tagged messages: matched by tag and ignore mask, oldest first,
    /// including messages that arrive before their receive is posted.
    #[test]
    fn tagged_matching_and_unexpected() -> Result {
        let p = pair(1, 16, sys::KFI_CQ_FORMAT_TAGGED)?;
        if !Offers::of(&p.s).has(sys::KFI_TAGGED) {
            return skip(c"the provider offers no tagged messages (KFI_TAGGED)");
        }
        let mut sends = [[0u8; 16]; 4];
        for (i, s) in sends.iter_mut().enumerate() {
            s.fill(0x10 + i as u8);
        }
        // Three messages nobody waits for yet: tags 0x101, 0x102, 0x203.
        let tags = [0x101u64, 0x102, 0x203];
        for (i, &tag) in tags.iter().enumerate() {
            assert_eq!(tagged(&p.cep, false, &mut sends[i], tag, 0, i), 0);
        }
        for _ in 0..3 {
            tagged_entry(&p.ccq)?;
        }
        let mut r = [[0u8; 16]; 4];
        // Exact match takes 0x203, although older messages wait.
        assert_eq!(tagged(&p.sep, true, &mut r[0], 0x203, 0, 10), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag, e.len), (10, 0x203, 16));
        assert_eq!(e.flags & sys::KFI_TAGGED, sys::KFI_TAGGED);
        assert_eq!(r[0], sends[2]);
        // Ignoring the low byte matches the oldest of the other two.
        assert_eq!(tagged(&p.sep, true, &mut r[1], 0x100, 0xff, 11), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (11, 0x101));
        assert_eq!(r[1], sends[0]);
        // Posted first: a receive for 0x7 waits while 0x8 arrives (and is
        // held), then 0x7 lands in it.
        assert_eq!(tagged(&p.sep, true, &mut r[2], 0x7, 0, 12), 0);
        assert_eq!(tagged(&p.cep, false, &mut sends[3], 0x8, 0, 3), 0);
        assert_eq!(tagged(&p.cep, false, &mut sends[1], 0x7, 0, 4), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (12, 0x7));
        assert_eq!(r[2], sends[1]);
        assert_eq!(tagged(&p.sep, true, &mut r[3], 0x8, 0, 13), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (13, 0x8));
        assert_eq!(r[3], sends[3]);
        // 0x102 is still held: a wildcard receive gets it.
        let mut last = [0u8; 16];
        assert_eq!(tagged(&p.sep, true, &mut last, 0, u64::MAX, 14), 0);
        let e = tagged_entry(&p.scq)?;
        assert_eq!((e.op_context as usize, e.tag), (14, 0x102));
        assert_eq!(last, [0x11; 16]);
        Ok(())
    }

    /// RMA write and read with several local and remote buffers, write
    /// with remote CQ data, and the longest transfer (16 MiB at most) each
    /// way; the read lands directly in the initiator's buffer.
    #[test]
    fn rma_write_read() -> Result {
        const OFF: u64 = 0x4000_0000;
        let p = pair(2, 16, sys::KFI_CQ_FORMAT_DATA)?;
        let offers = Offers::of(&p.s);
        if !offers.has(sys::KFI_RMA) {
            return skip(c"the provider offers no RMA (KFI_RMA)");
        }
        let big_len = offers.max_msg.min(16 << 20);
        let mut target = zeroed(big_len, 0)?;
        let region = mr(
            &p.s,
            &mut target,
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            OFF,
            0,
        )?;
        let k = key(&region);
        let base = offers.base(&target, OFF);
        // Two local buffers into two remote pieces at odd places.
        let src = pattern(9000, 1)?;
        let (a, b) = src.split_at(1234);
        let local = [kvec(a), kvec(b)];
        let remote = [riov(base + 3, 5000, k), riov(base + 70001, 4000, k)];
        assert_eq!(rma(&p.cep, false, &local, &remote, 1, 0, 0), 0);
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert_eq!(
            (e.op_context as usize, e.flags),
            (1, sys::KFI_RMA | sys::KFI_WRITE)
        );
        assert!(target[3..5003] == src[..5000]);
        assert!(target[70001..74001] == src[5000..]);
        assert!(target[..3].iter().all(|&x| x == 0) && target[5003..70001].iter().all(|&x| x == 0));
        // Read both pieces back into one buffer.
        let mut back = zeroed(9000, 0)?;
        let lb = [kvec_mut(&mut back)];
        assert_eq!(rma(&p.cep, true, &lb, &remote, 2, 0, 0), 0);
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert_eq!(
            (e.op_context as usize, e.flags),
            (2, sys::KFI_RMA | sys::KFI_READ)
        );
        assert!(back[..] == src[..]);
        // Write with remote CQ data: the target hears of it.
        let one = [kvec(b"Z")];
        assert_eq!(
            rma(
                &p.cep,
                false,
                &one,
                &[riov(base + big_len as u64 - 1, 1, k)],
                3,
                sys::KFI_REMOTE_CQ_DATA,
                0xabc
            ),
            0
        );
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert_eq!(sread(&p.scq, &mut e), 1);
        assert_eq!(e.data, 0xabc);
        assert_eq!(e.flags & sys::KFI_REMOTE_WRITE, sys::KFI_REMOTE_WRITE);
        assert_eq!(target[big_len - 1], b'Z');
        // The longest transfer (16 MiB at most) each way.
        let big = pattern(big_len, 9)?;
        let lw = [kvec(&big)];
        assert_eq!(
            rma(&p.cep, false, &lw, &[riov(base, big_len, k)], 4, 0, 0),
            0
        );
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert!(target[..] == big[..]);
        let mut got = zeroed(big_len, 0)?;
        let lr = [kvec_mut(&mut got)];
        assert_eq!(
            rma(&p.cep, true, &lr, &[riov(base, big_len, k)], 5, 0, 0),
            0
        );
        assert_eq!(sread(&p.ccq, &mut e), 1);
        assert!(got[..] == big[..]);
        drop(region);
        drop(p);
        Ok(())
    }

    /// Bad key, out of bounds, missing rights, a closed region: error
    /// completions, nothing written, and the connection still works.
    #[test]
    fn rma_errors() -> Result {
        let p = pair(3, 16, sys::KFI_CQ_FORMAT_DATA)?;
        let offers = Offers::of(&p.s);
        if !offers.has(sys::KFI_RMA) {
            return skip(c"the provider offers no RMA (KFI_RMA)");
        }
        if offers.rdma() {
            return skip(c"on RDMA a remote access error ends the connection (the provider's own suite covers it)");
        }
        // On the heap: a kernel stack has no room for them.
        let mut rw = zeroed(4096, 0xaa)?;
        let mut ro = zeroed(4096, 0xbb)?;
        let mut wo = zeroed(4096, 0xcc)?;
        let rw_mr = mr(
            &p.s,
            &mut rw,
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            0,
            0,
        )?;
        let ro_mr = mr(&p.s, &mut ro, sys::KFI_REMOTE_READ, 0, 0)?;
        let wo_mr = mr(&p.s, &mut wo, sys::KFI_REMOTE_WRITE, 0, 0)?;
        let (krw, kro, kwo) = (key(&rw_mr), key(&ro_mr), key(&wo_mr));
        let data = [0x55u8; 64];
        let mut back = [0u8; 64];
        let cases: [(bool, sys::kfi_rma_iov, i32); 6] = [
            (false, riov(0, 64, krw ^ 0x5a5a_0000), ENOKEY.to_errno()),
            (false, riov(4096 - 63, 64, krw), ERANGE.to_errno()),
            (true, riov(u64::MAX - 10, 64, krw), ERANGE.to_errno()),
            (false, riov(0, 64, kro), EACCES.to_errno()),
            (true, riov(0, 64, kwo), EACCES.to_errno()),
            // The good one last but one: a bad descriptor after a good one
            // spoils the whole operation.
            (false, riov(100, 64, krw), 0),
        ];
        for (i, (read, d, err)) in cases.iter().enumerate() {
            let l = if *read {
                [kvec_mut(&mut back)]
            } else {
                [kvec(&data)]
            };
            let ret = if *err == 0 {
                rma(
                    &p.cep,
                    false,
                    &l,
                    &[riov(0, 32, krw), riov(4090, 32, krw)],
                    i,
                    0,
                    0,
                )
            } else {
                rma(&p.cep, *read, &l, &[*d], i, 0, 0)
            };
            assert_eq!(ret, 0);
            let e = wait_err(&p.ccq)?;
            assert_eq!(e.op_context as usize, i);
            let want = if *err == 0 { -ERANGE.to_errno() } else { -err };
            assert_eq!(e.err, want);
        }
        assert!(back.iter().all(|&x| x == 0));
        drop(wo_mr);
        drop(ro_mr);
        // A closed region's key is gone.
        assert_eq!(
            rma(&p.cep, false, &[kvec(&data)], &[riov(0, 64, kwo)], 9, 0, 0),
            0
        );
        assert_eq!(wait_err(&p.ccq)?.err, -ENOKEY.to_errno());
        // The connection still works; nothing was written before.
        assert_eq!(
            rma(&p.cep, false, &[kvec(&data)], &[riov(8, 64, krw)], 10, 0, 0),
            0
        );
        let mut e = sys::kfi_cq_data_entry::default();
        assert_eq!(sread(&p.ccq, &mut e), 1);
        drop(rw_mr);
        drop(p);
        assert!(rw[..8].iter().all(|&x| x == 0xaa));
        assert!(rw[8..72].iter().all(|&x| x == 0x55));
        assert!(rw[72..].iter().all(|&x| x == 0xaa));
        assert!(ro.iter().all(|&x| x == 0xbb) && wo.iter().all(|&x| x == 0xcc));
        Ok(())
    }

    /// The expected new value of an atomic, computed independently.
    fn expect(op: u32, signed: bool, wide: bool, t: u64, s: u64, c: u64) -> u64 {
        let (ts, ss) = if wide {
            (t as i64, s as i64)
        } else {
            (i64::from(t as u32 as i32), i64::from(s as u32 as i32))
        };
        let less = if signed { ss < ts } else { s < t };
        let more = if signed { ss > ts } else { s > t };
        let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
        let v = match op {
            sys::KFI_SUM => t.wrapping_add(s),
            sys::KFI_MIN => {
                if less {
                    s
                } else {
                    t
                }
            }
            sys::KFI_MAX => {
                if more {
                    s
                } else {
                    t
                }
            }
            sys::KFI_BOR => t | s,
            sys::KFI_BAND => t & s,
            sys::KFI_BXOR => t ^ s,
            sys::KFI_ATOMIC_WRITE => s,
            sys::KFI_ATOMIC_READ => t,
            sys::KFI_CSWAP => {
                if c == t {
                    s
                } else {
                    t
                }
            }
            _ => t,
        };
        v & mask
    }

    /// One atomic: operands, target and what to do.
    struct Atom {
        src: *const c_void,
        /// Compare operands (compare-and-swap), or NULL.
        cmp: *const c_void,
        /// Where the old values go (fetch and compare forms), or NULL.
        res: *mut c_void,
        count: usize,
        addr: u64,
        key: u64,
        datatype: u32,
        op: u32,
    }

    fn atomic(ep: &Owned<sys::kfid_ep>, a: &Atom, ctx: usize) -> c_int {
        let ioc = sys::kfi_ioc {
            addr: a.src.cast_mut(),
            count: a.count,
        };
        let rioc = sys::kfi_rma_ioc {
            addr: a.addr,
            count: a.count,
            key: a.key,
        };
        let m = sys::kfi_msg_atomic {
            msg_iov: &ioc,
            iov_count: 1,
            rma_iov: &rioc,
            rma_iov_count: 1,
            datatype: a.datatype,
            op: a.op,
            context: ctx as *mut c_void,
            ..Default::default()
        };
        let c = sys::kfi_ioc {
            addr: a.cmp.cast_mut(),
            count: a.count,
        };
        let mut r = sys::kfi_ioc {
            addr: a.res,
            count: a.count,
        };
        let none = core::ptr::null_mut();
        // SAFETY: An open endpoint; the operands outlive the completion
        // (callers wait for it).
        unsafe {
            if !a.cmp.is_null() {
                sys::kfi_compare_atomicmsg(ep.as_ptr(), &m, &c, none, 1, &mut r, none, 1, 0)
            } else if !a.res.is_null() {
                sys::kfi_fetch_atomicmsg(ep.as_ptr(), &m, &mut r, none, 1, 0)
            } else {
                sys::kfi_atomicmsg(ep.as_ptr(), &m, 0)
            }
        }
    }

    /// Whether the provider says it does `op` on `dt` in the form of
    /// `kfi_atomic` (neither `fetch` nor `compare`), `kfi_fetch_atomic` or
    /// `kfi_compare_atomic`: the most elements of one, or the error.
    fn valid(ep: &Owned<sys::kfid_ep>, dt: u32, op: u32, fetch: bool, compare: bool) -> c_int {
        let mut count = 0;
        // SAFETY: A query on an open endpoint; `count` is writable.
        let ret = unsafe {
            if compare {
                sys::kfi_compare_atomicvalid(ep.as_ptr(), dt, op, &mut count)
            } else if fetch {
                sys::kfi_fetch_atomicvalid(ep.as_ptr(), dt, op, &mut count)
            } else {
                sys::kfi_atomicvalid(ep.as_ptr(), dt, op, &mut count)
            }
        };
        if ret == 0 {
            count.min(c_int::MAX as usize) as c_int
        } else {
            ret
        }
    }

    /// Every op on u32, i32, u64 and i64 targets, with and without
    /// fetching, two elements at a time; compare-and-swap that hits and
    /// misses. What the provider says it does (`kfi_*atomicvalid`) must
    /// work and be right; what it says it does not must be refused with
    /// `EOPNOTSUPP` by the call as well, leaving the target alone. The
    /// 64-bit sum and compare-and-swap (what RDMA devices do) must be
    /// among what it does.
    #[test]
    fn atomics_on_every_type() -> Result {
        let p = pair(4, 16, sys::KFI_CQ_FORMAT_DATA)?;
        if !Offers::of(&p.s).has(sys::KFI_ATOMIC) {
            return skip(c"the provider offers no atomics (KFI_ATOMIC)");
        }
        let mut target = [0u64; 2];
        // SAFETY: `target` is plain memory of 16 bytes.
        let bytes =
            unsafe { core::slice::from_raw_parts_mut(target.as_mut_ptr().cast::<u8>(), 16) };
        let base = Offers::of(&p.s).base(bytes, 0);
        let region = mr(
            &p.s,
            bytes,
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            0,
            0,
        )?;
        let k = key(&region);
        let tp = target.as_mut_ptr();
        let types = [
            (sys::KFI_UINT32, false, false),
            (sys::KFI_INT32, true, false),
            (sys::KFI_UINT64, false, true),
            (sys::KFI_INT64, true, true),
        ];
        let ops = [
            sys::KFI_SUM,
            sys::KFI_MIN,
            sys::KFI_MAX,
            sys::KFI_BOR,
            sys::KFI_BAND,
            sys::KFI_BXOR,
            sys::KFI_ATOMIC_WRITE,
            sys::KFI_ATOMIC_READ,
            sys::KFI_CSWAP,
        ];
        let starts: [u64; 2] = [0xffff_fff0_8000_0005, 0x0000_0007_0000_0009];
        let srcs: [u64; 2] = [0x0000_0003_ffff_fff0, 0x8000_0000_0000_0002];
        let mut ctx = 0;
        let (mut done, mut refused) = (0, 0);
        let mut e = sys::kfi_cq_data_entry::default();
        // RDMA devices' atomics: 64-bit fetch-add and compare-and-swap.
        for (op, fetch, compare) in [
            (sys::KFI_SUM, false, false),
            (sys::KFI_SUM, true, false),
            (sys::KFI_CSWAP, true, true),
        ] {
            for dt in [sys::KFI_UINT64, sys::KFI_INT64] {
                assert!(valid(&p.cep, dt, op, fetch, compare) >= 2);
            }
        }
        for &(dt, signed, wide) in &types {
            let size = if wide { 8 } else { 4 };
            let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
            for &op in &ops {
                for fetch in [false, true] {
                    for hit in [false, true] {
                        if op != sys::KFI_CSWAP && hit {
                            continue;
                        }
                        ctx += 1;
                        // Element values of this type, two of them.
                        let t0 = [starts[0] & mask, starts[1] & mask];
                        let s0 = [srcs[0] & mask, srcs[1] & mask];
                        let c0 = if hit { t0 } else { [t0[0] ^ 1, t0[1]] };
                        let mut src = [0u8; 16];
                        let mut cmp = [0u8; 16];
                        let mut old = [0u8; 16];
                        for i in 0..2 {
                            let at = i * size;
                            // SAFETY: `tp` is the registered target, of 16
                            // bytes; no transfer is in flight.
                            let tb =
                                unsafe { core::slice::from_raw_parts_mut(tp.cast::<u8>(), 16) };
                            tb[at..at + size].copy_from_slice(&t0[i].to_ne_bytes()[..size]);
                            src[at..at + size].copy_from_slice(&s0[i].to_ne_bytes()[..size]);
                            cmp[at..at + size].copy_from_slice(&c0[i].to_ne_bytes()[..size]);
                        }
                        let cmp_p = if op == sys::KFI_CSWAP {
                            cmp.as_ptr().cast()
                        } else {
                            core::ptr::null()
                        };
                        let res_p = if fetch || op == sys::KFI_CSWAP {
                            old.as_mut_ptr().cast()
                        } else {
                            core::ptr::null_mut()
                        };
                        let a = Atom {
                            src: src.as_ptr().cast(),
                            cmp: cmp_p,
                            res: res_p,
                            count: 2,
                            addr: base,
                            key: k,
                            datatype: dt,
                            op,
                        };
                        let v = valid(&p.cep, dt, op, !res_p.is_null(), !cmp_p.is_null());
                        let ret = atomic(&p.cep, &a, ctx);
                        if v < 0 {
                            assert_eq!((ctx, v), (ctx, EOPNOTSUPP.to_errno()));
                            assert_eq!((ctx, ret), (ctx, EOPNOTSUPP.to_errno()));
                            refused += 1;
                        } else {
                            assert!(v >= 2);
                            assert_eq!((ctx, ret), (ctx, 0));
                            assert_eq!(sread(&p.ccq, &mut e), 1);
                            assert_eq!(e.op_context as usize, ctx);
                            done += 1;
                        }
                        // SAFETY: As above; the atomic completed.
                        let tb = unsafe { core::slice::from_raw_parts(tp.cast::<u8>(), 16) };
                        for i in 0..2 {
                            let at = i * size;
                            let mut v8 = [0u8; 8];
                            v8[..size].copy_from_slice(&tb[at..at + size]);
                            let got = u64::from_ne_bytes(v8) & mask;
                            let want = if v < 0 {
                                t0[i]
                            } else {
                                expect(op, signed, wide, t0[i], s0[i], c0[i])
                            };
                            assert_eq!((ctx, got), (ctx, want));
                            if !res_p.is_null() && v >= 0 {
                                let mut o = [0u8; 8];
                                o[..size].copy_from_slice(&old[at..at + size]);
                                assert_eq!(u64::from_ne_bytes(o) & mask, t0[i]);
                            }
                        }
                    }
                }
            }
        }
        // 2 x 4 types x (8 ops x 2 + compare-and-swap x 2 x 2).
        assert_eq!(done + refused, 4 * (8 * 2 + 4));
        assert!(done >= 12);
        // Unsupported types say so.
        let mut count = 0;
        // SAFETY: A query on an open endpoint.
        let ret = unsafe {
            sys::kfi_atomicvalid(p.cep.as_ptr(), sys::KFI_UINT8, sys::KFI_SUM, &mut count)
        };
        assert_eq!(ret, EOPNOTSUPP.to_errno());
        drop(region);
        drop(p);
        Ok(())
    }

    /// Several connections to one target, each with many fetch-adds in
    /// flight on the same counter, plus RMA writes to their own slots:
    /// every old value is seen exactly once and every slot is right.
    #[test]
    fn many_endpoints_many_operations() -> Result {
        const CONNS: usize = 3;
        const ADDS: usize = 24;
        const SLOT: usize = 1024;
        let (s, c) = sides(5)?;
        if !Offers::of(&s).has(sys::KFI_ATOMIC | sys::KFI_RMA) {
            return skip(c"the provider offers no RMA and atomics (KFI_RMA, KFI_ATOMIC)");
        }
        let pep = listen(&s)?;
        let ccq = cq_sized(&c, 256)?;
        let scq = cq_sized(&s, 16)?;
        // Connected first: an RDMA provider registers regions with a
        // work request on a connection of the domain.
        let mut eps = KVec::new();
        for _ in 0..CONNS {
            eps.push(connect_to(&c, &s, &ccq, &scq)?, GFP_KERNEL)?;
        }
        let mut counter = [0u64; 1];
        // SAFETY: Plain memory of 8 bytes.
        let cbytes =
            unsafe { core::slice::from_raw_parts_mut(counter.as_mut_ptr().cast::<u8>(), 8) };
        let offers = Offers::of(&s);
        let cbase = offers.base(cbytes, 0);
        let cmr = mr(
            &s,
            cbytes,
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            0,
            0,
        )?;
        let mut slots = zeroed(CONNS * ADDS * SLOT, 0)?;
        let sbase = offers.base(&slots, 0x10_0000);
        let smr = mr(&s, &mut slots, sys::KFI_REMOTE_WRITE, 0x10_0000, 0)?;
        let (ck, sk) = (key(&cmr), key(&smr));
        let one = 1u64;
        let mut olds = KVec::new();
        olds.resize(CONNS * ADDS, u64::MAX, GFP_KERNEL)?;
        let src = pattern(CONNS * ADDS * SLOT, 3)?;
        let mut e = sys::kfi_cq_data_entry::default();
        // Completions read while posting: a provider that holds fewer
        // operations than are posted says EAGAIN (within its tx size).
        let mut reaped = 0;
        let mut post = |f: &mut dyn FnMut() -> c_int| loop {
            let ret = f();
            if ret != EAGAIN.to_errno() {
                assert_eq!(ret, 0);
                return;
            }
            assert_eq!(sread(&ccq, &mut e), 1);
            reaped += 1;
        };
        for j in 0..ADDS {
            for (i, (cep, _)) in eps.iter().enumerate() {
                let n = i * ADDS + j;
                let res: *mut u64 = &mut olds[n];
                let a = Atom {
                    src: (&raw const one).cast(),
                    cmp: core::ptr::null(),
                    res: res.cast(),
                    count: 1,
                    addr: cbase,
                    key: ck,
                    datatype: sys::KFI_UINT64,
                    op: sys::KFI_SUM,
                };
                post(&mut || atomic(cep, &a, n));
                let piece = &src[n * SLOT..(n + 1) * SLOT];
                post(&mut || {
                    rma(
                        cep,
                        false,
                        &[kvec(piece)],
                        &[riov(sbase + (n * SLOT) as u64, SLOT, sk)],
                        10_000 + n,
                        0,
                        0,
                    )
                });
            }
        }
        for _ in reaped..2 * CONNS * ADDS {
            assert_eq!(sread(&ccq, &mut e), 1);
        }
        // Not all of them came back while posting.
        assert!(reaped < 2 * CONNS * ADDS);
        assert_eq!(counter[0], (CONNS * ADDS) as u64);
        let mut seen = KVec::new();
        seen.resize(CONNS * ADDS, false, GFP_KERNEL)?;
        for &o in olds.iter() {
            let o = o as usize;
            assert!(o < CONNS * ADDS && !seen[o]);
            seen[o] = true;
        }
        drop(eps);
        drop(pep);
        drop(cmr);
        drop(smr);
        assert!(slots[..] == src[..]);
        Ok(())
    }

    /// Commit completion on a persistent-memory region and on plain RAM,
    /// and delivery completion of a write: when the initiator's completion
    /// arrives, the data is in place at the target.
    #[test]
    fn delivery_and_commit_completion() -> Result {
        let p = pair(6, 16, sys::KFI_CQ_FORMAT_DATA)?;
        let offers = Offers::of(&p.s);
        if !offers.has(sys::KFI_RMA) {
            return skip(c"the provider offers no RMA (KFI_RMA)");
        }
        let wanted = sys::KFI_DELIVERY_COMPLETE | sys::KFI_COMMIT_COMPLETE;
        if offers.op_flags & wanted != wanted {
            return skip(c"the provider offers no delivery or commit completion");
        }
        let mut pmem = zeroed(8192, 0)?;
        let mut ram = zeroed(8192, 0)?;
        let all = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
        let pmr = mr(&p.s, &mut pmem, all, 0, sys::KFI_RMA_PMEM)?;
        let rmr = mr(&p.s, &mut ram, all, 0, 0)?;
        let src = pattern(8192, 5)?;
        let mut e = sys::kfi_cq_data_entry::default();
        let levels = [
            sys::KFI_COMMIT_COMPLETE,
            sys::KFI_DELIVERY_COMPLETE,
            sys::KFI_COMMIT_COMPLETE,
        ];
        let bases = [
            offers.base(&pmem, 0),
            offers.base(&ram, 0),
            offers.base(&ram, 0),
        ];
        for (i, (&flags, m)) in levels.iter().zip([&pmr, &rmr, &rmr]).enumerate() {
            let len = 1000 * (i + 1) + 1;
            assert_eq!(
                rma(
                    &p.cep,
                    false,
                    &[kvec(&src[..len])],
                    &[riov(bases[i] + 7, len, key(m))],
                    i,
                    flags,
                    0
                ),
                0
            );
            assert_eq!(sread(&p.ccq, &mut e), 1);
            let t = if i == 0 { &pmem } else { &ram };
            assert!(t[7..7 + len] == src[..len]);
        }
        drop(pmr);
        drop(rmr);
        drop(p);
        Ok(())
    }

    /// Reject with private data, connecting to nobody, and a peer that
    /// closes with operations in flight: EQ errors and error completions,
    /// never a hang.
    #[test]
    fn reject_nobody_and_peer_loss() -> Result {
        let (s, c) = sides(7)?;
        let offers = Offers::of(&s);
        let pep = listen(&s)?;
        let ccq = cq_sized(&c, 64)?;
        let scq = cq_sized(&s, 64)?;
        let cep = endpoint(&c, c.dst.first(), &ccq)?;
        assert_eq!(start_connect(&cep), 0);
        let (ev, buf, _) = event(&s)?;
        assert_eq!(ev, sys::KFI_CONNREQ);
        let req = cm_entry(&buf);
        // SAFETY: An open passive endpoint and its request; data lives
        // across the call.
        let ret =
            unsafe { sys::kfi_reject(pep.as_ptr(), (*req.info).handle, b"no".as_ptr().cast(), 2) };
        // SAFETY: The request's info is ours to free.
        unsafe { sys::kfi_freeinfo(req.info) };
        assert_eq!(ret, 0);
        assert_eq!(eq_error(&c)?.err, ECONNREFUSED.to_errno().wrapping_neg());
        drop(cep);
        drop(pep);
        // Nobody listens on the port any more.
        let cep = endpoint(&c, c.dst.first(), &ccq)?;
        assert_eq!(start_connect(&cep), 0);
        assert!(eq_error(&c)?.err > 0);
        drop(cep);
        // The peer goes away with sends, a read and an atomic in flight.
        let pep = listen(&s)?;
        let (cep, sep) = connect_to(&c, &s, &ccq, &scq)?;
        let mut target = zeroed(1 << 20, 1)?;
        let tmr = if offers.has(sys::KFI_RMA) {
            Some(mr(
                &s,
                &mut target,
                sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
                0,
                0,
            )?)
        } else {
            None
        };
        let big = pattern(offers.max_msg.min(4 << 20), 2)?;
        for i in 0..4 {
            // No receive is posted: these wait at the peer.
            // SAFETY: An open endpoint; `big` outlives the completions.
            let ret = unsafe { sys::kfi_sendmsg(cep.as_ptr(), &msg(&kvec(&big), i, 0), 0) };
            assert_eq!(ret, 0);
        }
        drop(sep);
        let mut canceled = 0;
        let mut e = sys::kfi_cq_data_entry::default();
        for _ in 0..4 {
            let n = sread(&ccq, &mut e);
            if n == -(sys::KFI_EAVAIL as isize) {
                let mut ce = sys::kfi_cq_err_entry::default();
                // SAFETY: Open CQ, writable entry.
                assert_eq!(unsafe { sys::kfi_cq_readerr(ccq.as_ptr(), &mut ce, 0) }, 1);
                canceled += 1;
            } else {
                assert_eq!(n, 1);
            }
        }
        // Every send completed one way or the other; the client hears of
        // the loss.
        assert!(canceled <= 4);
        let (ev, _, _) = event(&c)?;
        assert_eq!(ev, sys::KFI_SHUTDOWN);
        // Posting now fails at once.
        let mut one = [0u8; 8];
        if let Some(tmr) = &tmr {
            assert_ne!(
                rma(
                    &cep,
                    true,
                    &[kvec_mut(&mut one)],
                    &[riov(0, 8, key(tmr))],
                    9,
                    0,
                    0
                ),
                0
            );
        }
        // SAFETY: An open endpoint; `one` lives across the call.
        let r = unsafe { sys::kfi_sendmsg(cep.as_ptr(), &msg(&kvec(&one), 9, 0), 0) };
        assert_ne!(r, 0);
        drop(cep);
        drop(pep);
        drop(tmr);
        Ok(())
    }

    /// `kfi_getname` and `kfi_getpeer` agree across the connection.
    #[test]
    fn names_of_both_ends() -> Result {
        let p = pair(8, 16, sys::KFI_CQ_FORMAT_DATA)?;
        let mut a = [[0u8; 32]; 4];
        let mut lens = [32usize; 4];
        // SAFETY: Open endpoints; the buffers hold `lens` bytes.
        unsafe {
            assert_eq!(
                sys::kfi_getname(p.cep.fid(), a[0].as_mut_ptr().cast(), &mut lens[0]),
                0
            );
            assert_eq!(
                sys::kfi_getpeer(p.sep.as_ptr(), a[1].as_mut_ptr().cast(), &mut lens[1]),
                0
            );
            assert_eq!(
                sys::kfi_getname(p.sep.fid(), a[2].as_mut_ptr().cast(), &mut lens[2]),
                0
            );
            assert_eq!(
                sys::kfi_getpeer(p.cep.as_ptr(), a[3].as_mut_ptr().cast(), &mut lens[3]),
                0
            );
        }
        assert_eq!(lens[0], lens[1]);
        assert!(a[0][..lens[0]] == a[1][..lens[1]]);
        assert!(a[2][..lens[2]] == a[3][..lens[3]]);
        assert!(a[0][..lens[0]] != a[2][..lens[2]]);
        // The listener's name carries its port.
        let mut l = [0u8; 32];
        let mut ll = 32usize;
        // SAFETY: An open passive endpoint.
        let ret = unsafe { sys::kfi_getname(p.pep.fid(), l.as_mut_ptr().cast(), &mut ll) };
        assert_eq!(ret, 0);
        assert_eq!(ll, lens[2]);
        assert_eq!(l[2..4], a[2][2..4]);
        Ok(())
    }

    /// An address vector of `n`'s domain.
    fn av(n: &Net) -> Result<Owned<sys::kfid_av>> {
        let mut attr = sys::kfi_av_attr {
            type_: sys::KFI_AV_TABLE,
            count: 4,
            ..Default::default()
        };
        // SAFETY: An open domain, valid attributes.
        Owned::open(|o| unsafe {
            sys::kfi_av_open(n.domain.as_ptr(), &mut attr, o, core::ptr::null_mut())
        })
    }

    /// Inserts the source (`src`) or destination address of `info`.
    fn insert(av: &Owned<sys::kfid_av>, info: *mut sys::kfi_info, src: bool) -> Result<u64> {
        // SAFETY: A valid entry; its addresses are kmalloc'ed by it.
        let addr = unsafe {
            if src {
                (*info).src_addr
            } else {
                (*info).dest_addr
            }
        };
        let mut fi_addr = u64::MAX;
        // SAFETY: An open AV; one address of the domain's format.
        let n = unsafe {
            sys::kfi_av_insert(av.as_ptr(), addr, 1, &mut fi_addr, 0, core::ptr::null_mut())
        };
        if n != 1 {
            return Err(EINVAL);
        }
        Ok(fi_addr)
    }

    fn send_to(ep: &Owned<sys::kfid_ep>, buf: &[u8], to: u64, ctx: usize) -> c_int {
        let v = kvec(buf);
        let mut m = msg(&v, ctx, 0);
        m.addr = to;
        // SAFETY: An open endpoint; callers keep `buf` until completion.
        unsafe { sys::kfi_sendmsg(ep.as_ptr(), &m, 0) }
    }

    fn recv(ep: &Owned<sys::kfid_ep>, buf: &mut [u8], ctx: usize) -> c_int {
        let v = kvec_mut(buf);
        // SAFETY: An open endpoint; callers keep `buf` until completion.
        unsafe { sys::kfi_recvmsg(ep.as_ptr(), &msg(&v, ctx, 0), 0) }
    }

    /// Waits for a successful completion; a failed one is logged and is
    /// `EIO`.
    fn wait_ok(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_data_entry> {
        let mut e = sys::kfi_cq_data_entry::default();
        match sread(cq, &mut e) {
            1 => Ok(e),
            n if n == -(sys::KFI_EAVAIL as isize) => {
                let err = wait_err_entry(cq)?;
                pr_err!(
                    "completion of {} failed: {}\n",
                    err.op_context as usize,
                    err.err
                );
                Err(EIO)
            }
            n => Err(Error::from_errno(n as i32)),
        }
    }

    /// Reads the error entry that is waiting on `cq`.
    fn wait_err_entry(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_err_entry> {
        let mut err = sys::kfi_cq_err_entry::default();
        // SAFETY: Open CQ, writable entry.
        if unsafe { sys::kfi_cq_readerr(cq.as_ptr(), &mut err, 0) } != 1 {
            return Err(EPROTO);
        }
        Ok(err)
    }

    /// RDM endpoints reach each other through address vectors: messages
    /// both ways, a tagged message, RMA write and read and an atomic, and
    /// a peer nobody listens for.
    #[test]
    fn rdm_through_address_vectors() -> Result {
        let (mut b1, mut b2, mut b3) = ([0u8; 8], [0u8; 8], [0u8; 8]);
        let (sp, cp, np) = (port(9, &mut b1)?, port(10, &mut b2)?, port(11, &mut b3)?);
        let s = match net_typed(provider(), server_node(), sp, server_net(), sys::KFI_EP_RDM) {
            Err(e) if e == ENODATA => {
                return skip(c"the provider offers no RDM endpoints (KFI_EP_RDM)")
            }
            s => s?,
        };
        let c = net_typed(
            provider(),
            client_node(),
            cp,
            core::ptr::null_mut(),
            sys::KFI_EP_RDM,
        )?;
        let nobody = net_typed(
            provider(),
            server_node(),
            np,
            core::ptr::null_mut(),
            sys::KFI_EP_RDM,
        )?;
        let (sav, cav) = (av(&s)?, av(&c)?);
        let to_server = insert(&cav, s.src.first(), true)?;
        let to_nobody = insert(&cav, nobody.dst.first(), false)?;
        let to_client = insert(&sav, c.src.first(), true)?;
        let (scq, ccq) = (cq_sized(&s, 32)?, cq_sized(&c, 32)?);
        let sep = rdm_endpoint(&s, &scq, &sav)?;
        let cep = rdm_endpoint(&c, &ccq, &cav)?;

        // Client to server: a short and a long message.
        let big = pattern(100_000, 4)?;
        let mut r1 = [0u8; 32];
        let mut r2 = zeroed(100_000, 0)?;
        assert_eq!(recv(&sep, &mut r1, 1), 0);
        assert_eq!(recv(&sep, &mut r2, 2), 0);
        assert_eq!(send_to(&cep, b"datagram to the server", to_server, 3), 0);
        assert_eq!(send_to(&cep, &big, to_server, 4), 0);
        for _ in 0..2 {
            wait_ok(&ccq)?;
        }
        let e = wait_ok(&scq)?;
        assert_eq!((e.op_context as usize, e.len), (1, 22));
        assert_eq!(&r1[..22], b"datagram to the server");
        let e = wait_ok(&scq)?;
        assert_eq!((e.op_context as usize, e.len), (2, 100_000));
        assert!(r2[..] == big[..]);
        // Server to client, by the client's address in the server's AV.
        let mut back = [0u8; 16];
        assert_eq!(recv(&cep, &mut back, 5), 0);
        assert_eq!(send_to(&sep, b"reply from peer!", to_client, 6), 0);
        wait_ok(&scq)?;
        let e = wait_ok(&ccq)?;
        assert_eq!(e.op_context as usize, 5);
        assert_eq!(&back, b"reply from peer!");

        // RMA and an atomic through the AV.
        let mut target = zeroed(65536, 0)?;
        let region = mr(
            &s,
            &mut target,
            sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE,
            0,
            0,
        )?;
        let k = key(&region);
        let data = pattern(65536, 8)?;
        let lw = [kvec(&data)];
        let mut m = sys::kfi_msg_rma {
            rma_iov: &riov(0, 65536, k),
            rma_iov_count: 1,
            ..Default::default()
        };
        m.msg = msg(&lw[0], 7, 0);
        m.msg.addr = to_server;
        // SAFETY: An open endpoint; `data` outlives the completion.
        assert_eq!(unsafe { sys::kfi_writemsg(cep.as_ptr(), &m, 0) }, 0);
        let e = wait_ok(&ccq)?;
        assert_eq!(e.op_context as usize, 7);
        assert!(target[..] == data[..]);
        let mut got = zeroed(65536, 0)?;
        let lr = [kvec_mut(&mut got)];
        m.msg = msg(&lr[0], 8, 0);
        m.msg.addr = to_server;
        // SAFETY: As above, for `got`.
        assert_eq!(unsafe { sys::kfi_readmsg(cep.as_ptr(), &m, 0) }, 0);
        wait_ok(&ccq)?;
        assert!(got[..] == data[..]);

        // Nobody listens at the third address: the send fails.
        assert_eq!(send_to(&cep, b"lost", to_nobody, 9), 0);
        let err = wait_err(&ccq)?;
        assert_eq!(err.op_context as usize, 9);
        assert_eq!(err.err, ECONNREFUSED.to_errno().wrapping_neg());
        drop(region);
        drop(cep);
        drop(sep);
        drop(sav);
        drop(cav);
        Ok(())
    }
}
