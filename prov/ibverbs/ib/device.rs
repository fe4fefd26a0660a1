// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: what a device is (name, link, limits) read once when
//! ib_core announces it, and which device serves an address.

use core::{
    ffi::CStr,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{bindings, prelude::*, str::CString};

use super::addr::Addr;
use crate::ib_sys as sys;

/// How a port carries RDMA; also the name of the kfi fabric it forms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    Infiniband,
    Roce,
    Iwarp,
}

impl Link {
    /// The kfi fabric name of the link.
    pub(crate) fn fabric_name(self) -> &'static CStr {
        match self {
            Link::Infiniband => c"InfiniBand",
            Link::Roce => c"RoCE",
            Link::Iwarp => c"iWARP",
        }
    }

    /// The link of a fabric name.
    pub(crate) fn from_fabric_name(name: &CStr) -> Option<Self> {
        [Link::Infiniband, Link::Roce, Link::Iwarp]
            .into_iter()
            .find(|l| l.fabric_name() == name)
    }
}

/// The limits of a device the provider uses (from `ib_device_attr`).
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_qp_wr: u32,
    /// Scatter/gather entries of a send or RDMA write.
    pub(crate) max_send_sge: u32,
    /// Scatter/gather entries of an RDMA read.
    pub(crate) max_sge_rd: u32,
    /// Pages of one fast-registration region.
    pub(crate) max_frmr_pages: u32,
    /// The device does 64-bit fetch-add and compare-swap
    /// (`atomic_cap` is not `IB_ATOMIC_NONE`).
    pub(crate) atomics: bool,
    /// A PD's local key is that of a DMA region over all memory: the
    /// device has no local DMA key of its own (siw).
    pub(crate) global_local_key: bool,
}

/// A device as ib_core announced it to the provider's client.
///
/// # Invariants
///
/// `ptr` is a registered ib_device from the client's `add` call until
/// its `remove` call returns; the owner of a `Device` drops or stops
/// using it before then (see `devices.rs`).
pub(crate) struct Device {
    ptr: *mut sys::ib_device,
    /// The device's name ("siw0").
    pub(crate) name: CString,
    /// The link of its first RDMA port.
    pub(crate) link: Link,
    /// Its limits, read when it was added.
    pub(crate) limits: Limits,
    /// Its removal has begun: nothing new is made on it.
    gone: AtomicBool,
}

// SAFETY: The device pointer is only passed to ib_core, which may be
// called from any thread; the rest is owned data.
unsafe impl Send for Device {}
// SAFETY: See `Send`; nothing is mutated through a shared reference.
unsafe impl Sync for Device {}

impl Device {
    /// Reads what the provider needs of a device that ib_core just
    /// announced; `None` for a device with no RDMA link it can use.
    ///
    /// # Safety
    ///
    /// `ptr` is a registered device that stays registered until the
    /// returned value is no longer used (the client's `remove`).
    pub(crate) unsafe fn new(ptr: *mut sys::ib_device) -> Result<Option<Self>> {
        // SAFETY: A registered device (the caller's contract); its name is
        // a NUL-terminated string that we copy.
        let name = unsafe { CStr::from_char_ptr(sys::kfi_ib_device_name(ptr)) };
        let name = CString::try_from(name)?;
        // SAFETY: `ptr` is registered (the caller's contract); the port
        // range is read from it.
        let (first, last) = unsafe { (sys::kfi_ib_first_port(ptr), sys::kfi_ib_last_port(ptr)) };
        let link = (first..=last).find_map(|port| {
            // SAFETY: `ptr` is registered and `port` is one of its ports.
            match unsafe { sys::kfi_ib_port_link(ptr, port) } {
                sys::KFI_IB_LINK_INFINIBAND => Some(Link::Infiniband),
                sys::KFI_IB_LINK_ROCE => Some(Link::Roce),
                sys::KFI_IB_LINK_IWARP => Some(Link::Iwarp),
                _ => None,
            }
        });
        let Some(link) = link else {
            return Ok(None);
        };
        // SAFETY: `ptr` is registered; its attributes live as long as it.
        let a = unsafe { &*sys::kfi_ib_device_attrs(ptr) };
        let limits = Limits {
            max_qp_wr: a.max_qp_wr,
            max_send_sge: a.max_send_sge,
            // A device that leaves it 0 reads into what it writes from.
            max_sge_rd: if a.max_sge_rd == 0 {
                a.max_send_sge
            } else {
                a.max_sge_rd
            },
            max_frmr_pages: a.max_fast_reg_page_list_len,
            atomics: a.atomic_cap != sys::IB_ATOMIC_NONE,
            // SAFETY: `ptr` is registered; the call only reads its
            // attributes.
            global_local_key: unsafe { sys::kfi_ib_local_key_is_global(ptr) },
        };
        // INVARIANT: The caller's contract.
        Ok(Some(Self {
            ptr,
            name,
            link,
            limits,
            gone: AtomicBool::new(false),
        }))
    }

    /// Whether this side's RDMA reads would show a peer a key that opens
    /// all memory: an iWARP read names its sink's key on the wire, and
    /// the provider names sinks by the PD's local key, which is such a
    /// key on a device without a local DMA key of its own (siw, whose
    /// read responses also check no remote read right).
    pub(crate) fn reads_show_global_key(&self) -> bool {
        self.link == Link::Iwarp && self.limits.global_local_key
    }

    /// Notes that the device's removal has begun (before the provider
    /// looks for what it has on the device).
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
    }

    /// Whether the device's removal has begun. Asked under the lock of a
    /// list the removal walks, before something on the device joins it:
    /// what is not refused then is found by the removal.
    pub(crate) fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// The raw device, for the other wrappers of `ib/` (valid while the
    /// device is in the provider's list, see the invariant).
    pub(crate) fn as_ptr(&self) -> *mut sys::ib_device {
        self.ptr
    }

    /// An IPv4 address that a netdev of one of the device's ports has in
    /// namespace `net` (NULL: the initial one), with port 0;
    /// `EADDRNOTAVAIL` when none has one. Process context.
    pub(crate) fn ipv4_addr(&self, net: *mut bindings::net) -> Result<Addr> {
        let net = if net.is_null() {
            &raw mut bindings::init_net
        } else {
            net
        };
        let mut sin = bindings::sockaddr_in::default();
        // SAFETY: The device is registered while this value lives (type
        // invariant), `net` is alive (the `kfi_domain_attr.net` contract)
        // and `sin` is valid for writes.
        kernel::error::to_result(unsafe { sys::kfi_ib_device_ipv4(self.ptr, net, &mut sin) })?;
        // SAFETY: `sin` is a plain `sockaddr_in`, read as its bytes.
        let bytes = unsafe {
            core::slice::from_raw_parts((&raw const sin).cast::<u8>(), size_of_val(&sin))
        };
        Addr::from_bytes(bytes)
    }

    /// Whether this is the device at `ptr`.
    pub(crate) fn is(&self, ptr: *const sys::ib_device) -> bool {
        core::ptr::eq(self.ptr, ptr)
    }
}

/// The device (as its raw pointer, only to be compared) and port that
/// carry traffic from (`source`) or to `addr` in namespace `net`; ENODATA
/// when no RDMA device does. Process context; does not wait on the
/// network.
pub(crate) fn device_for(
    net: *mut bindings::net,
    addr: &Addr,
    source: bool,
) -> Result<(*const sys::ib_device, u32)> {
    let net = if net.is_null() {
        &raw mut bindings::init_net
    } else {
        net
    };
    let mut dev: *mut sys::ib_device = core::ptr::null_mut();
    let mut port = 0u32;
    // SAFETY: `net` is alive (the `kfi_domain_attr.net` contract), `addr`
    // is a valid socket address and the outputs are valid for writes.
    let ret =
        unsafe { sys::kfi_ib_device_for(net, addr.as_ptr(), source.into(), &mut dev, &mut port) };
    if ret != 0 {
        return Err(ENODATA);
    }
    // Only the identity is needed: the client's list holds the device.
    // SAFETY: kfi_ib_device_for returned a reference on `dev`.
    unsafe { sys::ib_device_put(dev) };
    Ok((dev, port))
}
