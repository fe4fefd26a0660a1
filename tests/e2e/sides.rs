// SPDX-License-Identifier: GPL-2.0

//! What every case of `kfi_e2e` shares: the two sides of a case (a server
//! and a client, each with its own fabric, domain and EQ), a connected
//! pair of endpoints between them, what the provider under test offers,
//! buffers, registered regions and waiting for completions.

use kernel::prelude::*;

use crate::{
    kfi::{kfabric::Owned, kfi_sys as sys},
    net::*,
    port, provider, server_net, server_node,
};

/// A connected pair of endpoints, each side with its own fabric, domain,
/// EQ and CQ. Fields drop in order: endpoints, then the listener, the CQs
/// and the sides.
pub(crate) struct Pair {
    pub(crate) cep: Owned<sys::kfid_ep>,
    pub(crate) sep: Owned<sys::kfid_ep>,
    pub(crate) pep: Owned<sys::kfid_pep>,
    pub(crate) ccq: Owned<sys::kfid_cq>,
    pub(crate) scq: Owned<sys::kfid_cq>,
    /// Kept open for the client endpoint.
    _c: Net,
    pub(crate) s: Net,
}

/// What the provider under test offers, as its entry for `n` says.
pub(crate) struct Offers {
    caps: u64,
    pub(crate) op_flags: u64,
    pub(crate) max_msg: usize,
    /// Most local buffers of an operation, and of a receive.
    pub(crate) tx_iov: usize,
    pub(crate) rx_iov: usize,
    mr_mode: u64,
    protocol: u32,
}

impl Offers {
    pub(crate) fn of(n: &Net) -> Self {
        let fi = n.src.first();
        // SAFETY: A valid entry with its attributes, owned by `n`.
        unsafe {
            Self {
                caps: (*fi).caps,
                op_flags: (*(*fi).tx_attr).op_flags,
                max_msg: (*(*fi).ep_attr).max_msg_size,
                tx_iov: (*(*fi).tx_attr).iov_limit,
                rx_iov: (*(*fi).rx_attr).iov_limit,
                mr_mode: (*(*fi).domain_attr).mr_mode,
                protocol: (*(*fi).ep_attr).protocol,
            }
        }
    }

    pub(crate) fn has(&self, caps: u64) -> bool {
        self.caps & caps == caps
    }

    /// Whether the wire protocol is RDMA's (a remote access error ends
    /// the connection).
    pub(crate) fn rdma(&self) -> bool {
        matches!(
            self.protocol,
            sys::KFI_PROTO_RDMA_CM_IB_RC | sys::KFI_PROTO_IWARP
        )
    }

    /// The remote address of the first byte of `buf`, registered at
    /// `offset`: its virtual address where the provider says so.
    pub(crate) fn base(&self, buf: &[u8], offset: u64) -> u64 {
        if self.mr_mode & sys::KFI_MR_VIRT_ADDR != 0 {
            buf.as_ptr() as u64
        } else {
            offset
        }
    }
}

/// The server and client sides of case `case`.
pub(crate) fn sides(case: i32) -> Result<(Net, Net)> {
    let mut b = [0u8; 8];
    let p = port(case, &mut b)?;
    let s = net_in(provider(), server_node(), p, server_net())?;
    let c = net_in(provider(), server_node(), p, core::ptr::null_mut())?;
    Ok((s, c))
}

/// The sides of case `case`, connected, with CQs of `cq_size` entries in
/// `format`.
pub(crate) fn pair(case: i32, cq_size: usize, format: u32) -> Result<Pair> {
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

/// `len` bytes of `fill`, in vmalloc memory.
pub(crate) fn zeroed(len: usize, fill: u8) -> Result<KVVec<u8>> {
    let mut v = KVVec::with_capacity(len, GFP_KERNEL)?;
    v.resize(len, fill, GFP_KERNEL)?;
    Ok(v)
}

/// Registers `buf` on the domain of `n` at remote address `offset`.
///
/// # Safety
///
/// `buf` outlives the returned region (the caller drops the region
/// first), and is not touched while a peer's access to it is in flight.
pub(crate) unsafe fn mr(
    n: &Net,
    buf: &mut [u8],
    access: u64,
    offset: u64,
    flags: u64,
) -> Result<Owned<sys::kfid_mr>> {
    // SAFETY: `buf` lives as long as the region (safety requirement).
    unsafe {
        n.domain
            .register_raw(buf.as_mut_ptr(), buf.len(), access, offset, 0, flags)
    }
}

/// Reads the error entry that is waiting on `cq`.
pub(crate) fn read_err(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_err_entry> {
    let mut err = sys::kfi_cq_err_entry::default();
    if cq.readerr(&mut err) != 1 {
        return Err(EPROTO);
    }
    Ok(err)
}

/// Waits for a completion that must be an error: its entry.
pub(crate) fn wait_err(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_err_entry> {
    let mut e = sys::kfi_cq_data_entry::default();
    if sread(cq, &mut e) != -(sys::KFI_EAVAIL as isize) {
        return Err(EPROTO);
    }
    read_err(cq)
}

/// Waits for a successful completion; a failed one is logged and is
/// `EIO`.
pub(crate) fn wait_ok(cq: &Owned<sys::kfid_cq>) -> Result<sys::kfi_cq_data_entry> {
    let mut e = sys::kfi_cq_data_entry::default();
    match sread(cq, &mut e) {
        1 => Ok(e),
        n if n == -(sys::KFI_EAVAIL as isize) => {
            let err = read_err(cq)?;
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
