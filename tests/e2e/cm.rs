// SPDX-License-Identifier: GPL-2.0

//! Connection management: connecting to an explicit address, a refused
//! request, connecting to nobody, a peer lost with operations in flight,
//! and the names of both ends.

use kernel::prelude::*;

use crate::{
    kfi::kfi_sys as sys,
    net::*,
    pattern::pattern,
    rma::{riov, rma},
    sides::*,
};

/// `kfi_connect` with an explicit address: an endpoint opened for a
/// destination nobody listens on connects to the listener's address given
/// in the call, so only the explicit address can succeed.
pub(crate) fn connect_to_an_explicit_address() -> Result {
    let (s, c) = sides(13)?;
    let (_, elsewhere) = sides(14)?;
    let pep = listen(&s)?;
    let ccq = cq_format(&elsewhere, 8, sys::KFI_CQ_FORMAT_DATA)?;
    let scq = cq_format(&s, 8, sys::KFI_CQ_FORMAT_DATA)?;
    let cep = endpoint(&elsewhere, elsewhere.dst.first(), &ccq)?;
    assert_eq!(rc(cep.connect_to(c.dst.dest_addr(), b"explicit")), 0);
    let (ev, buf, _) = event(&s)?;
    assert_eq!(ev, sys::KFI_CONNREQ);
    let req = take_req(&buf)?;
    let sep = endpoint_for(&s, &req, &scq);
    drop(req);
    let sep = sep?;
    assert_eq!(rc(sep.accept(&[])), 0);
    assert_eq!(event(&s)?.0, sys::KFI_CONNECTED);
    assert_eq!(event(&elsewhere)?.0, sys::KFI_CONNECTED);
    drop((cep, sep, pep));
    Ok(())
}

/// Reject with private data, connecting to nobody, and a peer that closes
/// with operations in flight: EQ errors and error completions, never a
/// hang.
pub(crate) fn reject_nobody_and_peer_loss() -> Result {
    let (s, c) = sides(7)?;
    let offers = Offers::of(&s);
    let pep = listen(&s)?;
    let ccq = cq_sized(&c, 64)?;
    let scq = cq_sized(&s, 64)?;
    let cep = endpoint(&c, c.dst.first(), &ccq)?;
    assert_eq!(rc(cep.connect(&[])), 0);
    let (ev, buf, _) = event(&s)?;
    assert_eq!(ev, sys::KFI_CONNREQ);
    let req = take_req(&buf)?;
    let ret = rc(pep.reject(req.info(), b"no"));
    drop(req);
    assert_eq!(ret, 0);
    assert_eq!(eq_error(&c)?.err, ECONNREFUSED.to_errno().wrapping_neg());
    drop(cep);
    drop(pep);
    // Nobody listens on the port any more.
    let cep = endpoint(&c, c.dst.first(), &ccq)?;
    assert_eq!(rc(cep.connect(&[])), 0);
    assert!(eq_error(&c)?.err > 0);
    drop(cep);
    // The peer goes away with sends, a read and an atomic in flight.
    let pep = listen(&s)?;
    let (cep, sep) = connect_to(&c, &s, &ccq, &scq)?;
    let mut target = zeroed(1 << 20, 1)?;
    let tmr = if offers.has(sys::KFI_RMA) {
        let access = sys::KFI_REMOTE_READ | sys::KFI_REMOTE_WRITE;
        // SAFETY: `target` outlives the region, dropped at the end.
        Some(unsafe { mr(&s, &mut target, access, 0, 0) }?)
    } else {
        None
    };
    let big = pattern(offers.max_msg.min(4 << 20), 2)?;
    for i in 0..4 {
        // No receive is posted: these wait at the peer.
        // SAFETY: `big` outlives the completions, all read below.
        let ret = rc(unsafe { cep.sendmsg(&msg(&kvec(&big), i, 0), 0) });
        assert_eq!(ret, 0);
    }
    drop(sep);
    let mut canceled = 0;
    let mut e = sys::kfi_cq_data_entry::default();
    for _ in 0..4 {
        let n = sread(&ccq, &mut e);
        if n == -(sys::KFI_EAVAIL as isize) {
            let mut ce = sys::kfi_cq_err_entry::default();
            assert_eq!(ccq.readerr(&mut ce), 1);
            canceled += 1;
        } else {
            assert_eq!(n, 1);
        }
    }
    // Every send completed one way or the other; the client hears of the
    // loss.
    assert!(canceled <= 4);
    let (ev, _, _) = event(&c)?;
    assert_eq!(ev, sys::KFI_SHUTDOWN);
    // Posting now fails at once.
    let mut one = [0u8; 8];
    if let Some(tmr) = &tmr {
        let local = [kvec_mut(&mut one)];
        // SAFETY: Refused at once (asserted), so nothing uses `one` later.
        let ret = unsafe { rma(&cep, true, &local, &[riov(0, 8, tmr.key())], 9, 0, 0) };
        assert_ne!(ret, 0);
    }
    // SAFETY: Refused at once (asserted), so nothing uses `one` later.
    let r = rc(unsafe { cep.sendmsg(&msg(&kvec(&one), 9, 0), 0) });
    assert_ne!(r, 0);
    drop(cep);
    drop(pep);
    drop(tmr);
    Ok(())
}

/// `kfi_getname` and `kfi_getpeer` agree across the connection.
pub(crate) fn names_of_both_ends() -> Result {
    let p = pair(8, 16, sys::KFI_CQ_FORMAT_DATA)?;
    let mut a = [[0u8; 32]; 4];
    let lens = [
        p.cep.getname(&mut a[0])?,
        p.sep.getpeer(&mut a[1])?,
        p.sep.getname(&mut a[2])?,
        p.cep.getpeer(&mut a[3])?,
    ];
    assert_eq!(lens[0], lens[1]);
    assert!(a[0][..lens[0]] == a[1][..lens[1]]);
    assert!(a[2][..lens[2]] == a[3][..lens[3]]);
    assert!(a[0][..lens[0]] != a[2][..lens[2]]);
    // The listener's name carries its port.
    let mut l = [0u8; 32];
    let ll = p.pep.getname(&mut l)?;
    assert_eq!(ll, lens[2]);
    assert_eq!(l[2..4], a[2][2..4]);
    Ok(())
}
