// SPDX-License-Identifier: GPL-2.0

//! `kfi_sockets_cm`: connection management called where it does not
//! belong. `kfi_accept` answers a connection request once, on the
//! endpoint made for it, before the connection's transmitter starts: on
//! a live connection (either side, or a second time) its `Accept` frame
//! would land between the transmitter's frames, or inside one. It must be
//! refused with `EINVAL`, write nothing, and leave the connection working.

use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

use super::{
    frame,
    kfi::{kfabric::Owned, kfi_sys as sys},
    ksock::Socket,
    net::*,
    wire::{Hdr, Op},
};

use super::hostile_peers::*;

/// The raw peer `raw` has no byte to read (after a moment for any to
/// arrive).
fn nothing_arrives(raw: &Socket) -> Result {
    fsleep(Delta::from_millis(200));
    let mut b = [0u8; 1];
    match raw.recv_now(&mut b)? {
        None => Ok(()),
        Some(n) => {
            pr_err!("kfi_sockets_cm: the peer got {} byte(s)\n", n);
            Err(EBADE)
        }
    }
}

/// A message from the raw peer `raw` still reaches the receive posted on
/// `ep` (completions on `c`): the connection still works.
fn still_connected(ep: &Owned<sys::kfid_ep>, c: &Owned<sys::kfid_cq>, raw: &Socket) -> Result {
    let mut buf = [0u8; 16];
    let v = kvec_mut(&mut buf);
    // SAFETY: `buf` outlives the completion read below, or the endpoint
    // (closed by the caller) on failure.
    unsafe { ep.recvmsg(&msg(&v, 9, 0), 0) }?;
    let mut h = Hdr::new(Op::Msg, 0, 0);
    h.len = 5;
    frame::send_frame(raw, &h, &[], &[b"hello"])?;
    let mut e = sys::kfi_cq_data_entry::default();
    let r = sread(c, &mut e);
    ensure!(
        r == 1 && e.op_context as usize == 9 && e.len == 5,
        "receive: {} (context {}, {} bytes)",
        r,
        e.op_context as usize,
        e.len
    );
    ensure!(&buf[..5] == b"hello", "received other bytes");
    Ok(())
}

#[kunit_tests(kfi_sockets_cm)]
mod cases {
    use super::*;

    /// `kfi_accept` on the connecting side, and a second one on the
    /// accepting side, are refused: `EINVAL`, no byte to the peer, the
    /// connection unharmed.
    #[test]
    fn accept_on_a_live_connection_is_refused() -> Result {
        let n = net(c"7527")?;
        let l = raw_listener(7527)?;
        let c = cq(&n)?;
        let (ep, raw) = kfi_client(&n, &c, &l)?;
        let outcome = (|| -> Result {
            ensure!(
                rc(ep.accept(&[])) == EINVAL.to_errno(),
                "client accept taken"
            );
            nothing_arrives(&raw)?;
            still_connected(&ep, &c, &raw)
        })();
        drop(ep);
        drop(raw);
        outcome?;
        let n = net(c"7528")?;
        let pep = listen(&n)?;
        let c = cq(&n)?;
        let (raw, sep) = raw_client(&n, 7528, &c)?;
        let outcome = (|| -> Result {
            ensure!(
                rc(sep.accept(&[])) == EINVAL.to_errno(),
                "second accept taken"
            );
            nothing_arrives(&raw)?;
            still_connected(&sep, &c, &raw)
        })();
        drop(sep);
        drop(raw);
        drop(pep);
        outcome
    }
}
