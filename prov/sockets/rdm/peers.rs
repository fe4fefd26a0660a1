// SPDX-License-Identifier: GPL-2.0

//! The connections of an RDM endpoint: a peer's request taken from the
//! listener (its claimed address checked against the socket), a
//! connection opened to a peer, and their filing under the peer's
//! listening address within the endpoint's bound (`rdm_max_peers`,
//! handshakes in progress included). Each handshake runs on a worker of
//! its own (process context) and is bounded by `handshake_timeout_ms`.

use kernel::{prelude::*, sync::Arc};

use super::state::{spawn, Conn, Rdm};
use crate::{
    conn::{self, Shared},
    frame::{self, Answer},
    host_key,
    ksock::{SockAddr, Socket},
    pep::{refuse, with_timeout},
};

/// Whether a live connection that `peer` opened is filed already.
fn has_incoming(conns: &[Conn], peer: &SockAddr) -> bool {
    conns
        .iter()
        .any(|c| c.incoming && c.peer.as_bytes() == peer.as_bytes() && c.conn.usable())
}

/// The live connections that peers on `peer`'s host (`SockAddr::same_host`) opened, and
/// their requests being accepted (`claimed`).
fn from_host(conns: &[Conn], claimed: &[SockAddr], peer: &SockAddr) -> usize {
    let prefix = crate::ipv6_host_prefix();
    let filed = conns
        .iter()
        .filter(|c| c.incoming && c.peer.same_host(peer, prefix) && c.conn.usable())
        .count();
    filed.saturating_add(claimed.iter().filter(|c| c.same_host(peer, prefix)).count())
}

/// Takes the connections that ended out of the list, for the caller to
/// close outside the lock (the next use of such a peer reconnects). If
/// there is no memory to hold them, they stay listed until a later call.
fn take_ended(conns: &mut KVec<Conn>) -> KVec<Arc<Shared>> {
    let n = conns.iter().filter(|c| !c.conn.usable()).count();
    let Ok(mut ended) = KVec::with_capacity(n, GFP_KERNEL) else {
        return KVec::new();
    };
    let mut i = 0;
    while i < conns.len() && ended.len() < n {
        if conns.get(i).is_some_and(|c| c.conn.usable()) {
            i += 1;
            continue;
        }
        match conns.remove(i) {
            // Within the capacity: does not allocate or fail.
            Ok(c) => {
                if let Err(e) = ended.push_within_capacity(c.conn) {
                    // Closed rather than dropped while hooked.
                    e.0.close();
                }
            }
            Err(_) => break,
        }
    }
    ended
}

/// Files a connection on `sock` under the peer's address, unless the
/// endpoint is closing: then it is closed here. Its room was reserved by
/// `track` of its socket, which moves from the handshakes to the
/// connections here, under one lock: counted in both for a moment, the
/// last room looked taken to the next peer, which was refused. An
/// `incoming` one's address was reserved by `claim_peer`, which the
/// caller releases after this.
fn add_conn(
    r: &Rdm,
    sock: &Arc<Socket>,
    peer: SockAddr,
    conn: Arc<Shared>,
    incoming: bool,
) -> Result<Arc<Shared>> {
    let mut s = r.state.lock();
    if s.closing {
        drop(s);
        conn.close();
        return Err(ECANCELED);
    }
    let ended = take_ended(&mut s.conns);
    let filed = s.conns.push(
        Conn {
            peer,
            conn: conn.clone(),
            incoming,
        },
        GFP_KERNEL,
    );
    if filed.is_ok() {
        s.busy.retain(|b| !Arc::ptr_eq(b, sock));
    }
    drop(s);
    for c in ended.iter() {
        c.close();
    }
    if let Err(e) = filed {
        conn.close();
        return Err(e.into());
    }
    Ok(conn)
}

/// Tracks a socket a worker may wait on (see `State::busy`), reserving
/// room for its connection: an endpoint has at most `rdm_max_peers`
/// connections, handshakes in progress included (`ENOSPC` beyond). Ended
/// connections do not count; with `tidy` they are closed here, else the
/// next filing closes them (`add_conn`): the listener's accept work, which
/// must not wait for other work on the provider's queue (a close waits
/// for the connection's), tracks without. The socket stays tracked until
/// its connection is filed or has failed, so the count never drops below
/// what exists.
fn track(r: &Rdm, sock: &Arc<Socket>, tidy: bool) -> Result {
    let mut s = r.state.lock();
    if s.closing {
        return Err(ECANCELED);
    }
    let ended = if tidy {
        take_ended(&mut s.conns)
    } else {
        KVec::new()
    };
    let live = s.conns.iter().filter(|c| c.conn.usable()).count();
    let room = live.saturating_add(s.busy.len()) < crate::rdm_max_peers();
    let pushed = if room {
        s.busy.push(sock.clone(), GFP_KERNEL).map_err(Error::from)
    } else {
        Err(ENOSPC)
    };
    drop(s);
    for c in ended.iter() {
        c.close();
    }
    pushed
}

fn untrack(r: &Rdm, sock: &Arc<Socket>) {
    r.state.lock().busy.retain(|b| !Arc::ptr_eq(b, sock));
}

/// A new connection on our socket `sock` to `peer`, running.
fn connection(r: &Rdm, sock: Arc<Socket>, peer: SockAddr) -> Result<Arc<Shared>> {
    let conn = Shared::new(
        Some(sock),
        Some(peer),
        r.ns,
        r.mrs.clone(),
        r.rxq.clone(),
        false,
        // The peer's host: its held messages outlive this connection.
        Some(host_key::of(&peer)),
    )?;
    let cq = r.state.lock().tx_cq;
    conn.state.lock().tx_cq = cq;
    conn::start(&conn)?;
    Ok(conn)
}

/// Takes a peer's connection (from the listener's accept work): its
/// request is read on a worker of its own.
pub(super) fn take(r: &Arc<Rdm>, s: &Arc<Socket>) -> Result {
    // The room for its connection first: a request that takes another's
    // handshake slot must not be refused after that one was shut down.
    track(r, s, false).map_err(|e| if e == ENOSPC { refuse(s, e) } else { e })?;
    if let Err(e) = begin_reading(r, s) {
        untrack(r, s);
        return Err(if e == EBUSY { refuse(s, e) } else { e });
    }
    let s2 = s.clone();
    spawn(r, move |r| incoming(r, s2)).inspect_err(|_| {
        untrack(r, s);
        end_reading(r, s);
    })
}

/// Counts the request on `s` about to be read (`readers.rs`: `EBUSY`
/// beyond `handshake_max`, or `handshake_max_per_host` from its host), so
/// peers that connect and stay silent cannot make the endpoint hold a
/// worker for each, nor a few hosts take all the slots: a crowded host's
/// oldest request may give way, its socket shut down here.
fn begin_reading(r: &Rdm, s: &Arc<Socket>) -> Result {
    // A socket reset since its accept has no peer: nothing to read.
    let from = s.peer_addr()?;
    let evicted = r.state.lock().reading.begin(&from, s)?;
    // Its worker sees the end of the stream and lets go of it.
    if let Some(v) = evicted {
        v.shutdown();
    }
    Ok(())
}

/// Ends the slot of the request on `s` if it still has one (a request
/// that was read gave it up then).
fn end_reading(r: &Rdm, s: &Arc<Socket>) {
    r.state.lock().reading.end(s);
}

/// The address a peer's request claims (its listening address), checked
/// against the socket: the IP must be the one the peer connects from (a
/// wildcard claim is filed under that IP), and no live connection that the
/// peer opened may have it already, nor a request being accepted (`EACCES`
/// or `EADDRINUSE` otherwise). The peers on one host open
/// `rdm_max_peers_per_host` connections at most (`ENOSPC` beyond), so that
/// one host cannot take all of the endpoint's `rdm_max_peers` and keep the
/// others out (while they are read, its requests count against
/// `handshake_max_per_host`, see [`begin_reading`]). Filed in its canonical form: a peer that
/// varies the bytes that do not name an address (`sin_zero`, the flow
/// label) still claims the same one. Taken for this request in the same step
/// (`State::claimed`): the caller releases it with [`unclaim`] once the
/// connection is filed or has failed.
fn claim_peer(r: &Rdm, sock: &Socket, data: &[u8]) -> Result<SockAddr> {
    let claim = SockAddr::from_bytes(data)?;
    let real = sock.peer_addr()?;
    // Only the port is the claim's: the IP and, for IPv6, the scope are
    // the socket's, so that a claim cannot name a link-local address on
    // another interface than the one the peer came from.
    if !claim.ip_unspecified() && !claim.same_ip(&real) {
        return Err(EACCES);
    }
    let peer = real.with_port(claim.port()).canonical();
    let mut s = r.state.lock();
    if has_incoming(&s.conns, &peer) || s.claimed.iter().any(|c| c.as_bytes() == peer.as_bytes()) {
        return Err(EADDRINUSE);
    }
    if from_host(&s.conns, &s.claimed, &peer) >= crate::rdm_max_peers_per_host() {
        return Err(ENOSPC);
    }
    s.claimed.push(peer, GFP_KERNEL)?;
    Ok(peer)
}

/// Releases the claim [`claim_peer`] took.
fn unclaim(r: &Rdm, peer: &SockAddr) {
    let mut s = r.state.lock();
    if let Some(i) = s
        .claimed
        .iter()
        .position(|c| c.as_bytes() == peer.as_bytes())
    {
        let _ = s.claimed.remove(i);
    }
}

/// A peer's request: its private data is the peer's listening address.
fn incoming(r: &Arc<Rdm>, sock: Arc<Socket>) {
    let outcome = (|| -> Result {
        let data = with_timeout(&sock, || frame::read_connreq(&sock))?;
        // Read: its slot is free for the next request, unless it gave the
        // slot away while it was read (its socket was shut down).
        if r.state.lock().reading.end(&sock) {
            return Err(ECONNABORTED);
        }
        let peer = match claim_peer(r, &sock, &data) {
            Ok(p) => p,
            Err(e) => {
                // The peer hears `ECONNREFUSED`.
                let _ = with_timeout(&sock, || frame::reject(&sock, &[]));
                return Err(e);
            }
        };
        let filed = (|| -> Result {
            frame::accept(&sock, &[])?;
            let conn = connection(r, sock.clone(), peer)?;
            add_conn(r, &sock, peer, conn, true)?;
            Ok(())
        })();
        // Filed by now (the filed connection refuses twins from here on)
        // or failed.
        unclaim(r, &peer);
        filed
    })();
    untrack(r, &sock);
    end_reading(r, &sock);
    if outcome.is_err() {
        sock.shutdown();
    }
}

/// Opens a connection to `peer`: our listening address is the request's
/// private data. `ENOSPC` when the endpoint has `rdm_max_peers`
/// connections already.
pub(super) fn open(r: &Rdm, peer: SockAddr) -> Result<Arc<Shared>> {
    let sock = Arc::new(Socket::tcp_in(&peer, r.ns)?, GFP_KERNEL)?;
    track(r, &sock, true)?;
    let conn = open_tracked(r, &sock, peer);
    untrack(r, &sock);
    conn
}

/// The handshake of `open` on its tracked socket `sock`, and the filing of
/// the connection.
fn open_tracked(r: &Rdm, sock: &Arc<Socket>, peer: SockAddr) -> Result<Arc<Shared>> {
    let answer = (|| -> Result<Answer> {
        let l = r.state.lock().listener.as_ref().map(|l| l.sock().clone());
        let me = l.ok_or(ENOTCONN)?.local_addr()?;
        // From our listening IP, which the peer checks our claim against;
        // in the socket's family (an IPv4-mapped listening address binds
        // as the IPv4 one when the peer is filed as IPv4, `canonical`).
        if !me.ip_unspecified() {
            sock.bind(&me.canonical().with_port(0))?;
        }
        with_timeout(sock, || {
            sock.connect_begin(&peer)?;
            // The endpoint's close shuts our (tracked) socket down, which
            // ends a handshake under way but not one begun after it: a
            // close from before is seen here.
            if r.state.lock().closing {
                return Err(ECANCELED);
            }
            frame::send_connreq(sock, me.as_bytes())?;
            frame::connect_finish(sock)
        })
    })();
    match answer? {
        Answer::Accepted(_) => {}
        Answer::Rejected(_) => return Err(ECONNREFUSED),
    }
    let conn = connection(r, sock.clone(), peer)?;
    add_conn(r, sock, peer, conn, false)
}
