// SPDX-License-Identifier: GPL-2.0

//! kfi_test_core.ko: KUnit suite `kfi_core` for kfabric.ko's provider
//! registry and object lifetime.
//!
//! The module registers its own test providers (statics of this module), so
//! the checks run against the real kfabric.ko, through its exported C ABI.

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

use kfi::kfi_sys as sys;

mod api_tests;
mod loop_provider;
mod queue_tests;
mod toolkit_tests;
mod tree;

module! {
    type: KfiTestCore,
    name: "kfi_test_core",
    authors: ["kfabric developers"],
    description: "KUnit tests of the kfabric core",
    license: "GPL",
}

/// The test providers of the `kfi_api` and `kfi_queues` suites stay
/// registered while the module is loaded (the suites run after `init`).
struct KfiTestCore {
    _loop: kfi::provider::Registration<loop_provider::Loop>,
    _tag: kfi::provider::Registration<loop_provider::Tag>,
}

impl kernel::Module for KfiTestCore {
    fn init(module: &'static ThisModule) -> Result<Self> {
        Ok(Self {
            _loop: kfi::provider::Registration::register(module)?,
            _tag: kfi::provider::Registration::register(module)?,
        })
    }
}

impl Drop for KfiTestCore {
    fn drop(&mut self) {
        // A test that failed half-way (KUnit aborts it without unwinding)
        // may have left a provider registered that points into this module.
        tests::deregister_leftovers();
    }
}

#[kunit_tests(kfi_core)]
mod tests {
    use super::{kfi::kfabric::*, sys, KfiTestCore};
    use core::ffi::CStr;
    use core::sync::atomic::{AtomicUsize, Ordering};
    use kernel::{bindings, error::code::*, prelude::*, str::CStrExt, ModuleMetadata};

    /// This module, the owner of the test providers.
    const THIS_MODULE: &ThisModule = &KfiTestCore::THIS_MODULE;

    /// A fabric of the test provider.
    #[repr(C)]
    struct TestFabric {
        fabric: sys::kfid_fabric,
    }

    static OPENS: AtomicUsize = AtomicUsize::new(0);
    static CLOSES: AtomicUsize = AtomicUsize::new(0);

    static FABRIC_OPS: sys::kfi_ops = sys::kfi_ops {
        size: size_of::<sys::kfi_ops>(),
        close: Some(test_fabric_close),
        bind: None,
        control: None,
    };

    /// The test provider's fabric-open entry point.
    ///
    /// # Safety
    ///
    /// `fabric` is valid for writes (kfabric.ko's contract with providers).
    unsafe extern "C" fn test_fabric_open(
        _attr: *const sys::kfi_fabric_attr,
        fabric: *mut *mut sys::kfid_fabric,
        _context: *mut c_void,
    ) -> c_int {
        let f = TestFabric {
            fabric: sys::kfid_fabric {
                fid: sys::kfid {
                    ops: &FABRIC_OPS,
                    ..Default::default()
                },
                ..Default::default()
            },
        };
        match KBox::new(f, GFP_KERNEL) {
            Ok(b) => {
                OPENS.fetch_add(1, Ordering::Relaxed);
                // SAFETY: kfabric.ko passes a valid out pointer.
                unsafe { *fabric = KBox::into_raw(b).cast() };
                0
            }
            Err(_) => ENOMEM.to_errno(),
        }
    }

    /// The test provider's close.
    ///
    /// # Safety
    ///
    /// `fid` is an open fabric of this provider, closed once.
    unsafe extern "C" fn test_fabric_close(fid: *mut sys::kfid) -> c_int {
        // SAFETY: `fid` is the first field of a `TestFabric` made by
        // `test_fabric_open` (both `repr(C)`), closed once by kfabric.ko.
        drop(unsafe { KBox::from_raw(fid.cast::<TestFabric>()) });
        CLOSES.fetch_add(1, Ordering::Relaxed);
        0
    }

    static PROV_A: StaticProvider =
        StaticProvider::new(c"kfi_test_a", version(1, 0), Some(test_fabric_open));
    static PROV_A_AGAIN: StaticProvider = StaticProvider::new(c"kfi_test_a", version(2, 0), None);
    static PROV_B: StaticProvider = StaticProvider::new(c"kfi_test_b", version(1, 0), None);
    static PROV_EMPTY: StaticProvider = StaticProvider::new(c"", version(1, 0), None);
    static PROV_LONG: StaticProvider =
        StaticProvider::new(c"kfi_test_name_of_thirty_two_char", version(1, 0), None);
    /// Registered without an owner only (never through `Registration`).
    static PROV_OWNERLESS: StaticProvider =
        StaticProvider::new(c"kfi_test_ownerless", version(1, 0), None);

    pub(super) fn deregister_leftovers() {
        for p in [
            &PROV_A,
            &PROV_A_AGAIN,
            &PROV_B,
            &PROV_EMPTY,
            &PROV_LONG,
            &PROV_OWNERLESS,
        ] {
            // A description that is not registered gives -ENOENT.
            raw_deregister(Some(p));
        }
    }

    /// `kfi_provider_register` of `p`, or of NULL.
    fn raw_register(api: u32, p: Option<&'static StaticProvider>) -> i32 {
        let ptr = p.map_or(core::ptr::null_mut(), StaticProvider::as_ptr);
        // SAFETY: NULL or a valid description that lives forever; kfabric.ko
        // checks everything else.
        unsafe { sys::kfi_provider_register(api, ptr) }
    }

    /// `kfi_provider_deregister` of `p`, or of NULL.
    fn raw_deregister(p: Option<&'static StaticProvider>) -> i32 {
        let ptr = p.map_or(core::ptr::null_mut(), StaticProvider::as_ptr);
        // SAFETY: NULL or a valid description; kfabric.ko only compares it
        // with the registered ones.
        unsafe { sys::kfi_provider_deregister(ptr) }
    }

    /// `kfi_close` of `fid`, or of NULL.
    fn raw_close(fid: Option<&mut sys::kfid>) -> i32 {
        let ptr = fid.map_or(core::ptr::null_mut(), core::ptr::from_mut);
        // SAFETY: NULL or a valid object header.
        unsafe { sys::kfi_close(ptr) }
    }

    fn errno<T>(r: Result<T>) -> i32 {
        match r {
            Ok(_) => 0,
            Err(e) => e.to_errno(),
        }
    }

    fn module_refs() -> i32 {
        // SAFETY: THIS_MODULE is this live module.
        unsafe { bindings::module_refcount(THIS_MODULE.as_ptr()) }
    }

    #[test]
    fn register_then_deregister() -> Result {
        let reg = Registration::register(&PROV_A, THIS_MODULE)?;
        assert_eq!(errno(reg.deregister().map_err(|(_, e)| e)), 0);
        // Gone: a second deregistration finds nothing.
        assert_eq!(raw_deregister(Some(&PROV_A)), ENOENT.to_errno());
        Ok(())
    }

    #[test]
    fn duplicate_name_refused() -> Result {
        let reg = Registration::register(&PROV_A, THIS_MODULE)?;
        let dup = Registration::register(&PROV_A_AGAIN, THIS_MODULE);
        assert_eq!(errno(dup), EEXIST.to_errno());
        let again = raw_register(API_VERSION, Some(&PROV_A));
        assert_eq!(again, EEXIST.to_errno());
        // The same description through the safe wrapper: refused before it
        // writes the owner kfabric.ko reads.
        assert_eq!(
            errno(Registration::register(&PROV_A, THIS_MODULE)),
            EEXIST.to_errno()
        );
        // A different name registers beside it.
        let b = Registration::register(&PROV_B, THIS_MODULE)?;
        drop(b);
        drop(reg);
        Ok(())
    }

    #[test]
    fn version_mismatch_refused() {
        let major = API_VERSION >> 16;
        let minor = API_VERSION & 0xffff;
        for v in [
            version(major + 1, 0),
            version(major, minor + 1),
            version(major - 1, minor),
        ] {
            let r = Registration::register_version(&PROV_B, THIS_MODULE, v);
            assert_eq!(errno(r), EINVAL.to_errno());
        }
        // The same major with an equal minor is served.
        let r = Registration::register_version(&PROV_B, THIS_MODULE, version(major, minor));
        assert_eq!(errno(r), 0);
    }

    #[test]
    fn bad_descriptions_refused() {
        assert_eq!(raw_register(API_VERSION, None), EINVAL.to_errno());
        for p in [&PROV_EMPTY, &PROV_LONG] {
            assert_eq!(
                errno(Registration::register(p, THIS_MODULE)),
                EINVAL.to_errno()
            );
        }
        assert_eq!(raw_deregister(None), EINVAL.to_errno());
        assert_eq!(raw_deregister(Some(&PROV_B)), ENOENT.to_errno());
    }

    #[test]
    fn ownerless_module_provider_refused() -> Result {
        // A description in this module's memory names no owner.
        assert_eq!(
            raw_register(API_VERSION, Some(&PROV_OWNERLESS)),
            EINVAL.to_errno()
        );
        // Nor does one the module allocated, whose fabric entry point is
        // this module's code: the module could unload under its objects.
        let mut p = KBox::new(
            sys::kfi_provider {
                name: c"kfi_test_ownerless".as_char_ptr(),
                version: version(1, 0),
                owner: core::ptr::null_mut(),
                getinfo: None,
                fabric: Some(test_fabric_open),
            },
            GFP_KERNEL,
        )?;
        let ptr: *mut sys::kfi_provider = &mut *p;
        // SAFETY: A valid description that outlives any registration (it
        // is deregistered below if the core took it).
        let r = unsafe { sys::kfi_provider_register(API_VERSION, ptr) };
        if r == 0 {
            // SAFETY: Registered just now, with no object open.
            unsafe { sys::kfi_provider_deregister(ptr) };
        }
        assert_eq!(r, EINVAL.to_errno());
        Ok(())
    }

    #[test]
    fn live_object_pins_provider() -> Result {
        let reg = Registration::register(&PROV_A, THIS_MODULE)?;
        let refs = module_refs();
        let opens = OPENS.load(Ordering::Relaxed);
        let fabric = Fabric::open(c"kfi_test_a")?;
        assert_eq!(OPENS.load(Ordering::Relaxed), opens + 1);
        assert_eq!(module_refs(), refs + 1);
        // Refused while the fabric is open; still registered afterwards.
        let reg = match reg.deregister() {
            // Deregistered with an open fabric: fail the case.
            Ok(()) => return Err(EINVAL),
            Err((reg, e)) => {
                assert_eq!(e.to_errno(), EBUSY.to_errno());
                reg
            }
        };
        let closes = CLOSES.load(Ordering::Relaxed);
        drop(fabric);
        assert_eq!(CLOSES.load(Ordering::Relaxed), closes + 1);
        assert_eq!(module_refs(), refs);
        assert_eq!(errno(reg.deregister().map_err(|(_, e)| e)), 0);
        Ok(())
    }

    #[test]
    fn fabric_open_errors() -> Result {
        assert_eq!(errno(Fabric::open(c"kfi_test_none")), ENODEV.to_errno());
        // A provider without a fabric entry point.
        let b = Registration::register(&PROV_B, THIS_MODULE)?;
        let refs = module_refs();
        assert_eq!(errno(Fabric::open(c"kfi_test_b")), ENOSYS.to_errno());
        // The failed open left no reference behind.
        assert_eq!(module_refs(), refs);
        drop(b);
        let mut out: *mut sys::kfid_fabric = core::ptr::null_mut();
        // SAFETY: NULL arguments are checked errors.
        unsafe {
            assert_eq!(
                sys::kfi_fabric(core::ptr::null(), &mut out, core::ptr::null_mut()),
                EINVAL.to_errno()
            );
            let attr = sys::kfi_fabric_attr::default();
            assert_eq!(
                sys::kfi_fabric(&attr, &mut out, core::ptr::null_mut()),
                EINVAL.to_errno()
            );
        }
        assert!(out.is_null());
        Ok(())
    }

    #[test]
    fn close_rejects_foreign_objects() {
        assert_eq!(raw_close(None), EINVAL.to_errno());
        // An object header kfabric.ko did not create (no core reference).
        let mut fid = sys::kfid {
            fclass: sys::KFI_CLASS_FABRIC,
            ops: &FABRIC_OPS,
            ..Default::default()
        };
        let closes = CLOSES.load(Ordering::Relaxed);
        assert_eq!(raw_close(Some(&mut fid)), EINVAL.to_errno());
        assert_eq!(CLOSES.load(Ordering::Relaxed), closes);
    }

    /// A second `kfi_close` of one object, and a child, a control call or
    /// a binding asked of a closed object, are `-EINVAL`: kfabric.ko finds the pointer
    /// among its open objects before it reads through it (a second close
    /// used to free the object twice).
    #[test]
    fn closed_object_is_einval() -> Result {
        let reg = Registration::register(&PROV_A, THIS_MODULE)?;
        let attr = sys::kfi_fabric_attr {
            prov_name: c"kfi_test_a".as_char_ptr().cast_mut(),
            ..Default::default()
        };
        let mut fabric: *mut sys::kfid_fabric = core::ptr::null_mut();
        // SAFETY: Valid attributes and out pointer.
        let r = unsafe { sys::kfi_fabric(&attr, &mut fabric, core::ptr::null_mut()) };
        assert_eq!(r, 0);
        if r != 0 {
            return Err(EINVAL);
        }
        let closes = CLOSES.load(Ordering::Relaxed);
        // SAFETY: Just opened; `fid` is its first field.
        let fid = unsafe { &raw mut (*fabric).fid };
        // SAFETY: An open object.
        assert_eq!(unsafe { sys::kfi_close(fid) }, 0);
        // From here `fabric` dangles: kfabric.ko must not read it.
        // SAFETY: The call's contract allows an object closed already.
        assert_eq!(unsafe { sys::kfi_close(fid) }, EINVAL.to_errno());
        assert_eq!(CLOSES.load(Ordering::Relaxed), closes + 1);
        let mut domain: *mut sys::kfid_domain = core::ptr::null_mut();
        let mut info = sys::kfi_info::default();
        // SAFETY: As above, a closed parent is checked before it is read.
        let r = unsafe { sys::kfi_domain(fabric, &mut info, &mut domain, core::ptr::null_mut()) };
        assert_eq!(r, EINVAL.to_errno());
        assert!(domain.is_null());
        // SAFETY: As above.
        let r = unsafe { sys::kfi_control(fid, 0, core::ptr::null_mut()) };
        assert_eq!(r, EINVAL.to_errno());
        // SAFETY: As above, for either object.
        let r = unsafe { sys::kfi_bind(fid, fid, 0) };
        assert_eq!(r, EINVAL.to_errno());
        drop(reg);
        Ok(())
    }

    #[test]
    fn strerror_texts() {
        let text = |e: i32| {
            // SAFETY: kfi_strerror returns a static NUL-terminated string.
            unsafe { CStr::from_char_ptr(sys::kfi_strerror(e)) }
        };
        assert_eq!(text(EBUSY.to_errno()).to_bytes(), b"object in use");
        assert_eq!(text(0).to_bytes(), b"success");
        assert_eq!(text(-100000).to_bytes(), b"unknown error");
        assert_eq!(text(i32::MIN).to_bytes(), b"unknown error");
        // An error entry's `err` is positive: the same text.
        assert_eq!(text(-EBUSY.to_errno()).to_bytes(), b"object in use");
        // Every code the API and the providers return has its own text.
        for e in [
            ENOKEY,
            ERANGE,
            E2BIG,
            ENOTCONN,
            EMSGSIZE,
            EACCES,
            EPROTO,
            ECANCELED,
            EOVERFLOW,
            ESHUTDOWN,
            EPIPE,
            ENOSPC,
            EINTR,
            EHOSTUNREACH,
            EAFNOSUPPORT,
            EINPROGRESS,
        ] {
            assert_ne!(text(e.to_errno()).to_bytes(), b"unknown error");
        }
        // KFI_EAVAIL is no errno: it never reads as an I/O error.
        let eavail = -(sys::KFI_EAVAIL as i32);
        assert_ne!(eavail, EIO.to_errno());
        assert_ne!(text(eavail).to_bytes(), text(EIO.to_errno()).to_bytes());
        assert_ne!(text(eavail).to_bytes(), b"unknown error");
        for code in [sys::KFI_ENOEQ, sys::KFI_ENOCQ, sys::KFI_ENOAV] {
            assert_ne!(text(-(code as i32)).to_bytes(), b"unknown error");
        }
    }
}
