// SPDX-License-Identifier: GPL-2.0

//! Socket addresses as rdma_cm takes them, parsed from a node and service.

use core::ffi::CStr;
use kernel::{bindings, error::to_result, prelude::*};

use crate::ib_sys as sys;

/// An IPv4 or IPv6 address with its port.
///
/// # Invariants
///
/// `ss` holds a `sockaddr_in` or `sockaddr_in6` (its family says which).
#[derive(Clone, Copy)]
pub(crate) struct Addr {
    ss: bindings::__kernel_sockaddr_storage,
}

// SAFETY: Plain bytes.
unsafe impl Send for Addr {}
// SAFETY: Plain bytes.
unsafe impl Sync for Addr {}

impl Addr {
    /// Parses a numeric `node` ("192.0.2.1", "::1") and a decimal
    /// `service` (port) in namespace `net` (NULL: the initial one; the
    /// scope of a link-local IPv6 address is looked up there). Process
    /// context.
    pub(crate) fn parse(net: *mut bindings::net, node: &CStr, service: &CStr) -> Result<Self> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        let net = if net.is_null() {
            &raw mut bindings::init_net
        } else {
            net
        };
        // SAFETY: `net` is a live namespace (the caller's contract for
        // `kfi_domain_attr.net`), the strings are NUL-terminated and `ss`
        // is large enough for either family.
        to_result(unsafe {
            sys::inet_pton_with_scope(
                net.cast(),
                bindings::AF_UNSPEC as u16,
                node.as_char_ptr(),
                service.as_char_ptr(),
                (&raw mut ss).cast(),
            )
        })
        .map_err(|_| EINVAL)?;
        // INVARIANT: inet_pton_with_scope wrote an AF_INET or AF_INET6
        // address.
        Ok(Self { ss })
    }

    /// Builds one from the raw bytes of a `sockaddr_in`/`sockaddr_in6`.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        if bytes.len() < size_of::<bindings::sockaddr_in>() || bytes.len() > size_of_val(&ss) {
            return Err(EINVAL);
        }
        // SAFETY: `ss` has room for `bytes` (checked above) and the two do
        // not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), (&raw mut ss).cast(), bytes.len())
        };
        let a = Self { ss };
        // INVARIANT: A known family, with the length it needs.
        if a.len() == 0 || bytes.len() < a.len() {
            return Err(EINVAL);
        }
        Ok(a)
    }

    /// Reads a `sockaddr_in` or `sockaddr_in6` from `sa` (its family says
    /// which).
    ///
    /// # Safety
    ///
    /// `sa` is valid for reads of the size its family names; it need not
    /// be aligned (a ULP may hand over any bytes).
    pub(crate) unsafe fn from_sockaddr(sa: *const bindings::sockaddr) -> Result<Self> {
        // SAFETY: A socket address starts with its family (the caller's
        // contract), read unaligned: the caller's bytes may sit anywhere.
        let family = u32::from(unsafe { (&raw const (*sa).sa_family).read_unaligned() });
        let len = match family {
            bindings::AF_INET => size_of::<bindings::sockaddr_in>(),
            bindings::AF_INET6 => size_of::<bindings::sockaddr_in6>(),
            _ => return Err(EINVAL),
        };
        // SAFETY: Valid for `len` bytes (the caller's contract).
        Self::from_bytes(unsafe { core::slice::from_raw_parts(sa.cast::<u8>(), len) })
    }

    fn family(&self) -> u32 {
        // SAFETY: Reading the family field of a plain union of bytes.
        u32::from(unsafe { self.ss.__bindgen_anon_1.__bindgen_anon_1.ss_family })
    }

    /// The address's length in bytes (0 for an unknown family).
    pub(crate) fn len(&self) -> usize {
        match self.family() {
            bindings::AF_INET => size_of::<bindings::sockaddr_in>(),
            bindings::AF_INET6 => size_of::<bindings::sockaddr_in6>(),
            _ => 0,
        }
    }

    /// The `KFI_SOCKADDR_IN*` format of the address.
    pub(crate) fn kfi_format(&self) -> u32 {
        if self.family() == bindings::AF_INET6 {
            crate::kfi::kfi_sys::KFI_SOCKADDR_IN6
        } else {
            crate::kfi::kfi_sys::KFI_SOCKADDR_IN
        }
    }

    /// The address as bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len()` is at most the size of the storage.
        unsafe { core::slice::from_raw_parts((&raw const self.ss).cast(), self.len()) }
    }

    /// The host part (the IP address, without port or scope): `sin_addr`
    /// or `sin6_addr`.
    pub(crate) fn host(&self) -> &[u8] {
        let at = if self.family() == bindings::AF_INET6 {
            8..24
        } else {
            4..8
        };
        self.as_bytes().get(at).unwrap_or(&[])
    }

    /// The port (host order).
    pub(crate) fn port(&self) -> u16 {
        // Both families have the port, in network order, at bytes 2..4.
        match self.as_bytes().get(2..4) {
            Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]),
            _ => 0,
        }
    }

    /// A pointer for calls that take a `struct sockaddr`.
    pub(crate) fn as_ptr(&self) -> *const bindings::sockaddr {
        (&raw const self.ss).cast()
    }
}
