// SPDX-License-Identifier: GPL-2.0

//! kfi_test_ibverbs.ko: KUnit suite `kfi_ibverbs`, kfi_ibverbs over a real
//! RDMA device. The guest script adds a soft-iWARP device on a veth end
//! with address [`NODE`] (tests/selftests/kfabric/rdma_link.sh) before
//! loading this module and deletes it afterwards. Written only with the safe ULP API of
//! `kfi/api/ulp`, as a Rust ULP would be.
//!
//! Covered so far: connection management through rdma_cm (connect with
//! private data, accept, reject, shutdown, refused connects, closes in
//! every state). Data transfer comes with the provider's data path.

use kernel::prelude::*;

#[path = "../../kfi/api/mod.rs"]
mod kfi;

module! {
    type: KfiTestIbverbs,
    name: "kfi_test_ibverbs",
    authors: ["kfabric developers"],
    description: "KUnit tests of kfi_ibverbs over a soft-iWARP device",
    license: "GPL",
}

struct KfiTestIbverbs;

impl kernel::Module for KfiTestIbverbs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Self)
    }
}

#[kunit_tests(kfi_ibverbs)]
mod tests {
    use super::kfi::{
        kfi_sys as sys,
        ulp::{CmEvent, Cq, Domain, Endpoint, Eq, Fabric, Hints},
    };
    use core::ffi::CStr;
    use kernel::prelude::*;

    /// The address of the RDMA device (`RDMA_LINK_ADDR` of rdma_link.sh).
    const NODE: &CStr = c"10.99.0.1";

    /// Longest wait for an event: connection setup on siw under TCG takes
    /// well under a second; the margin absorbs a loaded host.
    const WAIT_MS: i32 = 20_000;

    /// The ibverbs entries for [`NODE`] at `port` (as source, to listen
    /// and to open the domain, and as destination) and their fabric.
    struct Side {
        src: super::kfi::kfabric::InfoList,
        dst: super::kfi::kfabric::InfoList,
        fabric: Fabric,
    }

    fn side(port: &CStr) -> Result<Side> {
        let hints = Hints::provider(c"ibverbs")?;
        let src = hints.getinfo(NODE, port, sys::KFI_SOURCE)?;
        let dst = hints.getinfo(NODE, port, 0)?;
        let fabric = Fabric::open(src.entry())?;
        Ok(Side { src, dst, fabric })
    }

    /// `r`, with the failing step named in the log.
    fn step<T>(what: &str, r: Result<T>) -> Result<T> {
        r.inspect_err(|e| pr_err!("kfi_ibverbs test: {what}: {e:?}\n"))
    }

    fn endpoint<'a>(
        d: &'a Domain<'_>,
        info: &sys::kfi_info,
        cq: &'a Cq<'_>,
        eq: &'a Eq<'_>,
    ) -> Result<Endpoint<'a>> {
        let ep = d.endpoint(info)?;
        ep.bind_cq(cq, sys::KFI_TRANSMIT | sys::KFI_RECV)?;
        ep.bind_eq(eq)?;
        ep.enable()?;
        Ok(ep)
    }

    #[test]
    fn getinfo_names_the_siw_device() -> Result {
        let s = side(c"7610")?;
        let e = s.src.entry();
        // SAFETY: An entry from getinfo has valid attributes and strings.
        let (fabric, domain, ep_type) = unsafe {
            (
                CStr::from_char_ptr((*e.fabric_attr).name),
                CStr::from_char_ptr((*e.domain_attr).name),
                (*e.ep_attr).type_,
            )
        };
        assert_eq!(fabric, c"iWARP");
        assert_eq!(domain, c"siw0");
        assert_eq!(ep_type, sys::KFI_EP_MSG);
        let d = s.fabric.domain(e)?;
        drop(d);
        Ok(())
    }

    #[test]
    fn connect_accept_with_private_data() -> Result {
        let s = step("side", side(c"7611"))?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let _pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let (ccq, scq) = (d.cq(16)?, d.cq(16)?);
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        step("connect", cep.connect(b"hello from the client"))?;
        let CmEvent::ConnReq { req, data } = step("connreq", eq.sread(WAIT_MS))? else {
            return Err(EPROTO);
        };
        assert_eq!(data.as_bytes(), b"hello from the client");
        let sep = endpoint(&d, req.info(), &scq, &eq)?;
        drop(req);
        sep.accept(b"welcome")?;
        let (mut client_data, mut server_seen) = (false, false);
        for _ in 0..2 {
            let CmEvent::Connected { fid, data } = eq.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            if cep.is(fid) {
                assert_eq!(data.as_bytes(), b"welcome");
                client_data = true;
            } else {
                assert!(sep.is(fid));
                server_seen = true;
            }
        }
        assert!(client_data && server_seen);
        // Both ends learn of the shutdown.
        cep.shutdown()?;
        let mut ends = 0;
        for _ in 0..2 {
            let CmEvent::Shutdown { fid } = eq.sread(WAIT_MS)? else {
                return Err(EPROTO);
            };
            assert!(cep.is(fid) || sep.is(fid));
            ends += 1;
        }
        assert_eq!(ends, 2);
        // A second shutdown has no connection left.
        assert_eq!(cep.shutdown(), Err(ENOTCONN));
        Ok(())
    }

    #[test]
    fn reject_carries_private_data() -> Result {
        let s = side(c"7612")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let ccq = d.cq(16)?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(b"may I")?;
        let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        pep.reject(&req, b"no room")?;
        // The handle is answered: a second answer is refused.
        assert_eq!(pep.reject(&req, b"again"), Err(EINVAL));
        let CmEvent::Failed { fid, err, data } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert!(cep.is(fid));
        assert_eq!(err, ECONNREFUSED);
        assert_eq!(data.as_bytes(), b"no room");
        Ok(())
    }

    #[test]
    fn connect_to_nobody_fails_in_time() -> Result {
        let s = side(c"7613")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let ccq = d.cq(16)?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        let CmEvent::Failed { fid, err, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        assert!(cep.is(fid));
        assert!(err == ECONNREFUSED || err == ECONNRESET || err == EHOSTUNREACH);
        // Connecting again on a failed endpoint is refused.
        assert_eq!(cep.connect(&[]), Err(EISCONN));
        Ok(())
    }

    #[test]
    fn closes_in_every_state() -> Result {
        let s = side(c"7614")?;
        let d = step("domain", s.fabric.domain(s.src.entry()))?;
        let eq = step("eq", s.fabric.eq(16))?;
        let ccq = d.cq(16)?;
        // Opened, never enabled; enabled, never connected.
        drop(d.endpoint(s.dst.entry())?);
        drop(endpoint(&d, s.dst.entry(), &ccq, &eq)?);
        // A request the ULP never answers: closed with its listener.
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        let CmEvent::ConnReq { req, .. } = eq.sread(WAIT_MS)? else {
            return Err(EPROTO);
        };
        drop(req);
        drop(pep);
        drop(cep);
        // A connecting endpoint closed before the answer.
        let pep = step("listen", s.fabric.listen(s.src.entry(), &eq))?;
        let cep = step("client endpoint", endpoint(&d, s.dst.entry(), &ccq, &eq))?;
        cep.connect(&[])?;
        drop(cep);
        drop(pep);
        // Enabling twice and binding after enable are refused.
        let ep = endpoint(&d, s.dst.entry(), &ccq, &eq)?;
        assert_eq!(ep.enable(), Err(EBUSY));
        Ok(())
    }
}
