// SPDX-License-Identifier: GPL-2.0

//! The device's removal in the middle of traffic, with a connection
//! request held (the suite's last case).

use crate::common::*;
use crate::kfi::{
    kfi_sys as sys,
    ulp::{CmEvent, Cq, CqError, Hints},
};
use kernel::prelude::*;

pub(crate) fn device_removal_mid_traffic() -> Result {
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
    // SAFETY: The region is dropped by the end of the case, not leaked.
    let mr = unsafe { d.register(&mut target, sys::KFI_REMOTE_READ, 0) }?;
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
    // A second connect, whose request an endpoint holds, not enabled:
    // the removal must not wait for its close.
    let c2 = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
    c2.connect(&[])?;
    let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
        return Err(EPROTO);
    };
    let held = d.endpoint(req.info())?;
    drop(req);
    delete_device()?;
    // The three connections learn that they ended, and the listener
    // that no request will come any more (`ENODEV`, once).
    let (mut ended, mut told) = (0, 0);
    while ended < 3 || told < 1 {
        let ours = |fid| cep.is(fid) || sep.is(fid) || c2.is(fid);
        match eq.sread(WAIT_MS)? {
            CmEvent::Failed { fid, err, .. } if pep.is(fid) => {
                if err != ENODEV || told > 0 {
                    pr_err!("kfi_ibverbs test: the listener got {err:?}\n");
                    return Err(EPROTO);
                }
                told += 1;
                continue;
            }
            CmEvent::Shutdown { fid } => assert!(ours(fid)),
            CmEvent::Failed { fid, .. } => assert!(ours(fid)),
            _ => return Err(EPROTO),
        }
        ended += 1;
    }
    // The held request went with the device.
    held.bind_cq(&scq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
    held.bind_eq(&eq)?;
    assert_eq!(held.enable(), Err(ENODEV));
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
    drop(held);
    drop(c2);
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
