// SPDX-License-Identifier: GPL-2.0

//! RDM endpoints: peers reach each other through address vectors, with
//! messages, RMA and a peer nobody listens for.

use kernel::prelude::*;

use crate::{
    client_node,
    kfi::{
        kfabric::{InfoList, Owned},
        kfi_sys as sys,
    },
    net::*,
    pattern::pattern,
    port, provider,
    rma::riov,
    server_net, server_node,
    sides::*,
    skip,
};

/// An address vector of `n`'s domain.
fn av(n: &Net) -> Result<Owned<sys::kfid_av>> {
    n.domain.open_av_table(4)
}

/// Inserts the source (`src`) or destination address of the first entry
/// of `list`.
fn insert(av: &Owned<sys::kfid_av>, list: &InfoList, src: bool) -> Result<u64> {
    let addr = if src {
        list.src_addr()
    } else {
        list.dest_addr()
    };
    av.insert(addr).map_err(|_| EINVAL)
}

/// Sends `buf` to the peer at `to`: the C return value.
///
/// # Safety
///
/// `buf` stays valid, and is not touched, until the send's completion
/// (or its error entry) is read.
unsafe fn send_to(ep: &Owned<sys::kfid_ep>, buf: &[u8], to: u64, ctx: usize) -> c_int {
    let v = kvec(buf);
    let mut m = msg(&v, ctx, 0);
    m.addr = to;
    // SAFETY: The descriptor lives across the call; `buf` as the caller
    // guarantees.
    rc(unsafe { ep.sendmsg(&m, 0) })
}

/// Posts a receive into `buf`: the C return value.
///
/// # Safety
///
/// As for [`send_to`].
unsafe fn recv(ep: &Owned<sys::kfid_ep>, buf: &mut [u8], ctx: usize) -> c_int {
    let v = kvec_mut(buf);
    // SAFETY: As for `send_to`.
    rc(unsafe { ep.recvmsg(&msg(&v, ctx, 0), 0) })
}

/// RDM endpoints reach each other through address vectors: messages both
/// ways, a tagged message, RMA write and read and an atomic, and a peer
/// nobody listens for.
pub(crate) fn rdm_through_address_vectors() -> Result {
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
    let to_server = insert(&cav, &s.src, true)?;
    let to_nobody = insert(&cav, &nobody.dst, false)?;
    let to_client = insert(&sav, &c.src, true)?;
    let (scq, ccq) = (cq_sized(&s, 32)?, cq_sized(&c, 32)?);
    let sep = rdm_endpoint(&s, &scq, &sav)?;
    let cep = rdm_endpoint(&c, &ccq, &cav)?;

    // Client to server: a short and a long message.
    let big = pattern(100_000, 4)?;
    let mut r1 = [0u8; 32];
    let mut r2 = zeroed(100_000, 0)?;
    // SAFETY: Every buffer posted in this case lives to its end and is
    // read only once its completion is.
    unsafe {
        assert_eq!(recv(&sep, &mut r1, 1), 0);
        assert_eq!(recv(&sep, &mut r2, 2), 0);
        assert_eq!(send_to(&cep, b"datagram to the server", to_server, 3), 0);
        assert_eq!(send_to(&cep, &big, to_server, 4), 0);
    }
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
    // SAFETY: `back` and the literal live to the end of the case; `back`
    // is read only once its receive has completed.
    unsafe {
        assert_eq!(recv(&cep, &mut back, 5), 0);
        assert_eq!(send_to(&sep, b"reply from peer!", to_client, 6), 0);
    }
    wait_ok(&scq)?;
    let e = wait_ok(&ccq)?;
    assert_eq!(e.op_context as usize, 5);
    assert_eq!(&back, b"reply from peer!");

    // RMA and an atomic through the AV.
    let mut target = zeroed(65536, 0)?;
    let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
    // SAFETY: `target` outlives the region, dropped first; it is read only
    // once the write into it has completed.
    let region = unsafe { mr(&s, &mut target, access, 0, 0) }?;
    let k = region.key();
    let data = pattern(65536, 8)?;
    let lw = [kvec(&data)];
    let mut m = sys::kfi_msg_rma {
        rma_iov: &riov(0, 65536, k),
        rma_iov_count: 1,
        ..Default::default()
    };
    m.msg = msg(&lw[0], 7, 0);
    m.msg.addr = to_server;
    // SAFETY: `data` outlives the write's completion, waited for right
    // below; `target`'s region stays open.
    assert_eq!(rc(unsafe { cep.writemsg(&m, 0) }), 0);
    let e = wait_ok(&ccq)?;
    assert_eq!(e.op_context as usize, 7);
    assert!(target[..] == data[..]);
    let mut got = zeroed(65536, 0)?;
    let lr = [kvec_mut(&mut got)];
    m.msg = msg(&lr[0], 8, 0);
    m.msg.addr = to_server;
    // SAFETY: `got` outlives the read's completion and is read only once
    // it is, right below.
    assert_eq!(rc(unsafe { cep.readmsg(&m, 0) }), 0);
    wait_ok(&ccq)?;
    assert!(got[..] == data[..]);

    // Nobody listens at the third address: the send fails.
    // SAFETY: A literal, which lives forever.
    assert_eq!(unsafe { send_to(&cep, b"lost", to_nobody, 9) }, 0);
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
