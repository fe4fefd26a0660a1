// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `kfi_api`: getinfo matching across two providers, the object
//! tree's lifetime rules, and the checks kfabric.ko makes before it
//! dispatches a call.

use kernel::prelude::*;

#[kunit_tests(kfi_api)]
mod tests {
    use crate::{
        kfi::{kfabric::*, kfi_sys as sys},
        loop_provider::*,
        tree::{cq_attr, Tree},
        KfiTestCore,
    };
    use core::ffi::CStr;
    use kernel::{bindings, error::code::*, prelude::*, str::CStrExt, ModuleMetadata};

    const THIS_MODULE: &ThisModule = &KfiTestCore::THIS_MODULE;

    fn errno<T>(r: Result<T>) -> i32 {
        r.map_or_else(|e| e.to_errno(), |_| 0)
    }

    fn module_refs() -> i32 {
        // SAFETY: THIS_MODULE is this live module.
        unsafe { bindings::module_refcount(THIS_MODULE.as_ptr()) }
    }

    /// A hints entry; freed when dropped.
    struct Hints(*mut sys::kfi_info);

    impl Hints {
        fn new() -> Result<Self> {
            // SAFETY: No arguments.
            let p = unsafe { sys::kfi_allocinfo() };
            if p.is_null() {
                return Err(ENOMEM);
            }
            Ok(Self(p))
        }

        fn get(&mut self) -> &mut sys::kfi_info {
            // SAFETY: A valid entry owned by `self`.
            unsafe { &mut *self.0 }
        }

        fn info(&self) -> Info<'_> {
            // SAFETY: kfi_allocinfo's entry; the cases change its values,
            // never its pointers.
            unsafe { Info::new(&*self.0) }
        }

        fn set_prov_name(&mut self, name: &CStr) -> Result {
            // SAFETY: An entry of kfabric.ko's; the name is copied.
            kernel::error::to_result(unsafe {
                sys::kfi_info_set(
                    self.0,
                    sys::KFI_INFO_PROV_NAME,
                    name.as_char_ptr().cast(),
                    0,
                )
            })
        }
    }

    impl Drop for Hints {
        fn drop(&mut self) {
            // SAFETY: Made by kfi_allocinfo, freed once.
            unsafe { sys::kfi_freeinfo(self.0) };
        }
    }

    fn prov_name(i: &sys::kfi_info) -> &[u8] {
        // SAFETY: Entries of getinfo have attributes; names are NULL or
        // NUL-terminated.
        unsafe {
            let p = (*i.fabric_attr).prov_name;
            if p.is_null() {
                return b"";
            }
            CStr::from_char_ptr(p).to_bytes()
        }
    }

    /// The test providers' entries that `hints` selects, by name.
    fn listed(hints: Option<&Hints>) -> Result<KVec<&'static [u8]>> {
        let list = getinfo(hints.map(Hints::info), 0);
        let mut out = KVec::new();
        match list {
            Ok(list) => {
                for i in list.iter() {
                    match prov_name(&i) {
                        b"kfi_test_loop" => out.push(&b"loop"[..], GFP_KERNEL)?,
                        b"kfi_test_tag" => out.push(&b"tag"[..], GFP_KERNEL)?,
                        _ => {}
                    }
                }
            }
            Err(e) if e == ENODATA => {}
            Err(e) => return Err(e),
        }
        Ok(out)
    }

    #[test]
    fn getinfo_lists_every_provider() -> Result {
        let mut h = Hints::new()?;
        h.get().mode = TAG_MODE;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..], &b"tag"[..]]);
        // Entries name their provider and its version.
        let list = getinfo(Some(h.info()), 0)?;
        for i in list.iter() {
            if prov_name(&i) == b"kfi_test_tag" {
                // SAFETY: An entry's attributes.
                let f = unsafe { &*i.fabric_attr };
                assert_eq!(f.prov_version, version(1, 2));
                assert_eq!(f.api_version, API_VERSION);
                assert_eq!(i.caps, TAG_CAPS);
            }
        }
        Ok(())
    }

    #[test]
    fn getinfo_filters_by_hints() -> Result {
        let mut h = Hints::new()?;
        // Without the mode bit it requires, the tag provider is left out.
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        h.get().mode = TAG_MODE;
        h.get().caps = sys::KFI_TAGGED;
        assert_eq!(&listed(Some(&h))?[..], &[&b"tag"[..]]);
        h.get().caps = 0;
        // SAFETY: The entry's own attributes.
        unsafe { (*h.get().ep_attr).type_ = sys::KFI_EP_RDM };
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        // SAFETY: `h` owns a valid entry whose `ep_attr` it allocated; nothing
        // else refers to it.
        unsafe { (*h.get().ep_attr).type_ = sys::KFI_EP_UNSPEC };
        h.get().addr_format = sys::KFI_SOCKADDR_IN6;
        assert_eq!(&listed(Some(&h))?[..], &[&b"tag"[..]]);
        h.get().addr_format = sys::KFI_FORMAT_UNSPEC;
        // SAFETY: `h` owns a valid entry whose `rx_attr` it allocated; nothing
        // else refers to it.
        unsafe { (*h.get().rx_attr).caps = sys::KFI_TAGGED };
        assert_eq!(&listed(Some(&h))?[..], &[&b"tag"[..]]);
        // SAFETY: `h` owns a valid entry whose `rx_attr` it allocated; nothing
        // else refers to it.
        unsafe { (*h.get().rx_attr).caps = 0 };
        // The domain models: both are listed while the hints take any.
        h.get().mode = TAG_MODE;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..], &b"tag"[..]]);
        // SAFETY: `h` owns a valid entry whose `domain_attr` it allocated;
        // only `dom` refers to it while `dom` is used below.
        let dom = unsafe { &mut *h.get().domain_attr };
        // A thread-safe domain meets any threading hint.
        dom.threading = sys::KFI_THREAD_DOMAIN;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..], &b"tag"[..]]);
        dom.threading = sys::KFI_THREAD_SAFE;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        dom.threading = sys::KFI_THREAD_UNSPEC;
        // Automatic progress meets a manual hint, not the other way round.
        dom.data_progress = sys::KFI_PROGRESS_MANUAL;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..], &b"tag"[..]]);
        dom.data_progress = sys::KFI_PROGRESS_AUTO;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        dom.data_progress = sys::KFI_PROGRESS_UNSPEC;
        dom.control_progress = sys::KFI_PROGRESS_AUTO;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        dom.control_progress = sys::KFI_PROGRESS_UNSPEC;
        // A provider that needs MR modes the ULP cannot live with is left
        // out; one that needs none always fits.
        dom.mr_mode = sys::KFI_MR_LOCAL;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        dom.mr_mode = sys::KFI_MR_LOCAL | sys::KFI_MR_VIRT_ADDR;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..], &b"tag"[..]]);
        dom.mr_mode = 0;
        h.get().mode = 0;
        h.set_prov_name(c"kfi_test_loop")?;
        assert_eq!(&listed(Some(&h))?[..], &[&b"loop"[..]]);
        Ok(())
    }

    #[test]
    fn getinfo_unknown_provider_matches_nothing() -> Result {
        let mut h = Hints::new()?;
        h.get().mode = TAG_MODE;
        h.set_prov_name(c"kfi_test_none")?;
        assert_eq!(errno(getinfo(Some(h.info()), 0)), ENODATA.to_errno());
        Ok(())
    }

    #[test]
    fn getinfo_bad_arguments() -> Result {
        let mut out: *mut sys::kfi_info = core::ptr::null_mut();
        let null = core::ptr::null();
        let nohints: *const sys::kfi_info = core::ptr::null();
        // SAFETY: Checked errors; nothing is written on failure.
        unsafe {
            assert_eq!(
                sys::kfi_getinfo(version(2, 0), null, null, 0, nohints, &mut out),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_getinfo(version(1, 99), null, null, 0, nohints, &mut out),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_getinfo(API_VERSION, null, null, 1 << 40, nohints, &mut out),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_getinfo(API_VERSION, null, null, 0, nohints, core::ptr::null_mut()),
                EINVAL.to_errno()
            );
        }
        assert!(out.is_null());
        Ok(())
    }

    #[test]
    fn dupinfo_copies_deeply() -> Result {
        let list = getinfo(None, 0)?;
        let first = list.first();
        // SAFETY: A valid entry.
        let dup = unsafe { sys::kfi_dupinfo(first) };
        assert!(!dup.is_null());
        // SAFETY: Both valid entries with attributes.
        unsafe {
            assert!((*dup).next.is_null());
            let (a, b) = (&*(*first).fabric_attr, &*(*dup).fabric_attr);
            assert!(a.prov_name != b.prov_name);
            assert_eq!(
                CStr::from_char_ptr(a.prov_name),
                CStr::from_char_ptr(b.prov_name)
            );
            assert_eq!((*dup).caps, (*first).caps);
            assert!((*dup).tx_attr != (*first).tx_attr);
            sys::kfi_freeinfo(dup);
            assert!(sys::kfi_dupinfo(core::ptr::null()).is_null());
        }
        Ok(())
    }

    #[test]
    fn parents_outlive_children() -> Result {
        let refs = module_refs();
        let mut t = Tree::new(THIS_MODULE)?;
        // fabric, domain, two CQs, endpoint: one module reference each.
        assert_eq!(module_refs(), refs + 5);
        // SAFETY: Open objects; refused closes leave them open.
        unsafe {
            assert_eq!(sys::kfi_close(t.fabric.fid()), EBUSY.to_errno());
            assert_eq!(sys::kfi_close(t.domain.fid()), EBUSY.to_errno());
            assert_eq!(sys::kfi_close(t.tx.fid()), EBUSY.to_errno());
        }
        // The refused closes changed nothing.
        assert_eq!(module_refs(), refs + 5);
        if let Some(ep) = t.ep.take() {
            assert_eq!(errno(ep.close().map_err(|(_, e)| e)), 0);
        }
        assert_eq!(module_refs(), refs + 4);
        drop(t);
        assert_eq!(module_refs(), refs);
        Ok(())
    }

    #[test]
    fn send_and_receive_through_the_core() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let ep = t.ep()?;
        let mut buf = [0u8; 16];
        let msg = *b"hello, kfabric";
        let mut recv_ctx = 0u8;
        let recv = kernel::bindings::kvec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let send = kernel::bindings::kvec {
            iov_base: msg.as_ptr().cast_mut().cast(),
            iov_len: msg.len(),
        };
        let m = |iov: &kernel::bindings::kvec, ctx: *mut c_void, data: u64| {
            let mut m = sys::kfi_msg {
                iov_type: sys::KFI_KVEC,
                iov_count: 1,
                addr: sys::KFI_ADDR_UNSPEC,
                context: ctx,
                data,
                ..Default::default()
            };
            m.__bindgen_anon_1.msg_iov = iov;
            m
        };
        let rctx: *mut c_void = (&raw mut recv_ctx).cast();
        // SAFETY: Open endpoint; buffers live until the completions are read.
        unsafe {
            // Sending before kfi_enable is the provider's error.
            assert_eq!(
                sys::kfi_recvmsg(ep, &m(&recv, rctx, 0), sys::KFI_COMPLETION),
                0
            );
            assert_eq!(
                sys::kfi_sendmsg(ep, &m(&send, core::ptr::null_mut(), 0), 0),
                EINVAL.to_errno()
            );
            assert_eq!(sys::kfi_enable(ep), 0);
            assert_eq!(
                sys::kfi_sendmsg(
                    ep,
                    &m(&send, core::ptr::null_mut(), 7),
                    sys::KFI_REMOTE_CQ_DATA
                ),
                0
            );
        }
        let mut e = [sys::kfi_cq_data_entry::default(); 2];
        // SAFETY: Open CQs; `e` holds two entries of the CQs' format.
        let (nrx, ntx) = unsafe {
            (
                sys::kfi_cq_read(t.rx.as_ptr(), e.as_mut_ptr().cast(), 2),
                sys::kfi_cq_read(t.tx.as_ptr(), e[1..].as_mut_ptr().cast(), 1),
            )
        };
        assert_eq!((nrx, ntx), (1, 1));
        assert_eq!(e[0].op_context, rctx);
        assert_eq!(e[0].len, msg.len());
        assert_eq!(e[0].data, 7);
        assert_eq!(
            e[0].flags,
            sys::KFI_RECV | sys::KFI_MSG | sys::KFI_REMOTE_CQ_DATA
        );
        assert_eq!(&buf[..msg.len()], &msg[..]);
        assert_eq!(e[1].flags, sys::KFI_SEND | sys::KFI_MSG);
        Ok(())
    }

    #[test]
    fn dispatch_checks_arguments() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let ep = t.ep()?;
        let data = [0u8; LOOP_INJECT + 1];
        let iov = [kernel::bindings::kvec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: 8,
        }; LOOP_IOV_LIMIT + 1];
        let msg = |count: usize| {
            let mut m = sys::kfi_msg {
                iov_type: sys::KFI_KVEC,
                iov_count: count,
                ..Default::default()
            };
            m.__bindgen_anon_1.msg_iov = iov.as_ptr();
            m
        };
        let big = kernel::bindings::kvec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: LOOP_INJECT + 1,
        };
        let mut big_msg = msg(1);
        big_msg.__bindgen_anon_1.msg_iov = &big;
        let tagged = sys::kfi_msg_tagged {
            msg: msg(1),
            ..Default::default()
        };
        let rma = sys::kfi_msg_rma {
            msg: msg(1),
            ..Default::default()
        };
        let mut count = 0usize;
        // SAFETY: Every call gets valid or NULL pointers; the checked ones
        // fail before the provider is called.
        unsafe {
            // Not an endpoint.
            assert_eq!(
                sys::kfi_sendmsg(core::ptr::null_mut(), &msg(1), 0),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_sendmsg(t.tx.as_ptr().cast(), &msg(1), 0),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_sendmsg(ep, core::ptr::null(), 0),
                EINVAL.to_errno()
            );
            // Unknown flag; completion level the endpoint lacks.
            assert_eq!(sys::kfi_sendmsg(ep, &msg(1), 1 << 62), EINVAL.to_errno());
            assert_eq!(
                sys::kfi_sendmsg(ep, &msg(1), sys::KFI_COMMIT_COMPLETE),
                EOPNOTSUPP.to_errno()
            );
            // Too many buffers; an inject above inject_size.
            assert_eq!(
                sys::kfi_sendmsg(ep, &msg(LOOP_IOV_LIMIT + 1), 0),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_recvmsg(ep, &msg(LOOP_IOV_LIMIT + 1), 0),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_sendmsg(ep, &big_msg, sys::KFI_INJECT),
                EINVAL.to_errno()
            );
            // Capabilities the endpoint lacks, and one without ops.
            assert_eq!(sys::kfi_writemsg(ep, &rma, 0), EOPNOTSUPP.to_errno());
            assert_eq!(sys::kfi_readmsg(ep, &rma, 0), EOPNOTSUPP.to_errno());
            assert_eq!(
                sys::kfi_atomicvalid(ep, sys::KFI_UINT64, sys::KFI_SUM, &mut count),
                EOPNOTSUPP.to_errno()
            );
            assert_eq!(sys::kfi_tsendmsg(ep, &tagged, 0), ENOSYS.to_errno());
            // Connection management the provider does not implement.
            let mut len = 0usize;
            assert_eq!(
                sys::kfi_getname(ep.cast(), core::ptr::null_mut(), &mut len),
                ENOSYS.to_errno()
            );
            assert_eq!(sys::kfi_shutdown(ep, 0), ENOSYS.to_errno());
            assert_eq!(
                sys::kfi_connect(ep, core::ptr::null(), core::ptr::null(), 1),
                EINVAL.to_errno()
            );
            // A bind of something that is no object.
            let mut fake = sys::kfid::default();
            assert_eq!(sys::kfi_ep_bind(ep, &mut fake, 0), EINVAL.to_errno());
            // A domain without address vectors.
            let mut av: *mut sys::kfid_av = core::ptr::null_mut();
            let mut attr = sys::kfi_av_attr::default();
            assert_eq!(
                sys::kfi_av_open(t.domain.as_ptr(), &mut attr, &mut av, core::ptr::null_mut()),
                ENOSYS.to_errno()
            );
            // A wrong parent class.
            let mut cq: *mut sys::kfid_cq = core::ptr::null_mut();
            let mut a = cq_attr(4, 0);
            assert_eq!(
                sys::kfi_cq_open(
                    t.fabric.as_ptr().cast(),
                    &mut a,
                    &mut cq,
                    core::ptr::null_mut()
                ),
                EINVAL.to_errno()
            );
            assert!(av.is_null() && cq.is_null());
        }
        // An inject within the limit goes through to the provider (which
        // has no receive posted: -EAGAIN).
        // SAFETY: Open endpoint, valid message.
        unsafe {
            assert_eq!(sys::kfi_enable(ep), 0);
            assert_eq!(
                sys::kfi_sendmsg(ep, &msg(1), sys::KFI_INJECT),
                EAGAIN.to_errno()
            );
        }
        Ok(())
    }

    #[test]
    fn memory_registration() -> Result {
        let t = Tree::new(THIS_MODULE)?;
        let buf = [0u8; 64];
        let reg = |access: u64, key: u64| {
            Owned::open(|o| {
                // SAFETY: Open domain; `buf` outlives the region.
                unsafe {
                    sys::kfi_mr_reg(
                        t.domain.as_ptr(),
                        buf.as_ptr().cast(),
                        buf.len(),
                        access,
                        0,
                        key,
                        0,
                        o,
                        core::ptr::null_mut(),
                    )
                }
            })
        };
        let mr: Owned<sys::kfid_mr> = reg(sys::KFI_REMOTE_WRITE | sys::KFI_REMOTE_READ, 42)?;
        // SAFETY: An open region.
        assert_eq!(unsafe { (*mr.as_ptr()).key }, 42);
        // The domain cannot go while a region of it is open.
        // SAFETY: Open domain; the close is refused.
        assert_eq!(unsafe { sys::kfi_close(t.domain.fid()) }, EBUSY.to_errno());
        assert_eq!(errno(reg(1 << 40, 1)), EINVAL.to_errno());
        let mut out: *mut sys::kfid_mr = core::ptr::null_mut();
        // SAFETY: Checked errors.
        unsafe {
            assert_eq!(
                sys::kfi_mr_reg(
                    t.domain.as_ptr(),
                    core::ptr::null(),
                    8,
                    0,
                    0,
                    0,
                    0,
                    &mut out,
                    core::ptr::null_mut()
                ),
                EINVAL.to_errno()
            );
            assert_eq!(
                sys::kfi_mr_reg(
                    t.domain.as_ptr(),
                    buf.as_ptr().cast(),
                    8,
                    0,
                    0,
                    0,
                    1 << 3,
                    &mut out,
                    core::ptr::null_mut()
                ),
                EINVAL.to_errno()
            );
        }
        drop(mr);
        Ok(())
    }
}
