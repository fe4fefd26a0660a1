// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/debug/kfabric/getinfo`: `kfi_getinfo` for people, the way
//! libfabric users run `fi_info`. Writing sets the hints, as `key=value`
//! words separated by blanks:
//!
//! ```text
//! provider=sockets node=127.0.0.1 service=7000 caps=msg,rma ep=msg source
//! ```
//!
//! (keys: `provider`, `fabric`, `domain`, `node`, `service`, `caps` with
//! `msg`, `rma`, `tagged`, `atomic`, `read`, `write`, `send`, `recv`,
//! `remote_read`, `remote_write`, `ep` with `msg` or `rdm`, `format` with
//! `in` or `in6`, and the bare word `source` for `KFI_SOURCE`; an empty
//! write clears them). Reading runs `kfi_getinfo` with the hints and prints
//! every entry with its attributes. One set of hints for all readers: it is
//! a debugging aid, not an API. Process context only.

use core::ffi::CStr;
use core::fmt::{self, Write};
use kernel::{new_mutex, prelude::*, str::CStrExt, sync::Mutex, uaccess::UserSliceReader};

use crate::{info, kfi_sys as sys};

/// A NUL-terminated word of at most `N - 1` bytes.
#[derive(Clone, Copy)]
struct Word<const N: usize> {
    bytes: [u8; N],
}

impl<const N: usize> Word<N> {
    const EMPTY: Self = Self { bytes: [0; N] };

    fn set(&mut self, s: &[u8]) -> Result {
        if s.len() >= N || s.contains(&0) {
            return Err(EINVAL);
        }
        self.bytes = [0; N];
        self.bytes[..s.len()].copy_from_slice(s);
        Ok(())
    }

    /// The word as a C string, or NULL when empty.
    fn as_ptr(&self) -> *const c_char {
        if self.bytes[0] == 0 {
            core::ptr::null()
        } else {
            self.bytes.as_ptr().cast()
        }
    }
}

/// The hints written to the file.
#[derive(Clone, Copy)]
pub(crate) struct Query {
    provider: Word<{ sys::KFI_NAME_MAX as usize }>,
    fabric: Word<{ sys::KFI_NAME_MAX as usize }>,
    domain: Word<{ sys::KFI_NAME_MAX as usize }>,
    node: Word<64>,
    service: Word<16>,
    caps: u64,
    ep_type: u32,
    format: u32,
    flags: u64,
}

impl Query {
    const EMPTY: Self = Self {
        provider: Word::EMPTY,
        fabric: Word::EMPTY,
        domain: Word::EMPTY,
        node: Word::EMPTY,
        service: Word::EMPTY,
        caps: 0,
        ep_type: sys::KFI_EP_UNSPEC,
        format: sys::KFI_FORMAT_UNSPEC,
        flags: 0,
    };
}

/// The file's state: the last hints written.
pub(crate) type State = Mutex<Query>;

/// The initial (empty) state.
pub(crate) fn state() -> impl PinInit<State> {
    new_mutex!(Query::EMPTY)
}

/// Capability names of `caps=`, and how entries print them.
const CAPS: [(&str, u64); 10] = [
    ("msg", sys::KFI_MSG),
    ("rma", sys::KFI_RMA),
    ("tagged", sys::KFI_TAGGED),
    ("atomic", sys::KFI_ATOMIC),
    ("read", sys::KFI_READ),
    ("write", sys::KFI_WRITE),
    ("recv", sys::KFI_RECV),
    ("send", sys::KFI_SEND),
    ("remote_read", sys::KFI_REMOTE_READ),
    ("remote_write", sys::KFI_REMOTE_WRITE),
];

fn parse_caps(v: &[u8]) -> Result<u64> {
    v.split(|&b| b == b',')
        .filter(|c| !c.is_empty())
        .try_fold(0u64, |acc, c| {
            CAPS.iter()
                .find(|(n, _)| n.as_bytes() == c)
                .map(|(_, bit)| acc | bit)
                .ok_or(EINVAL)
        })
}

/// Parses a whole write into a new query.
fn parse(text: &[u8]) -> Result<Query> {
    let mut q = Query::EMPTY;
    for word in text
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        if word == b"source" {
            q.flags |= sys::KFI_SOURCE;
            continue;
        }
        let eq = word.iter().position(|&b| b == b'=').ok_or(EINVAL)?;
        let (key, val) = (&word[..eq], &word[eq + 1..]);
        match key {
            b"provider" | b"prov" => q.provider.set(val)?,
            b"fabric" => q.fabric.set(val)?,
            b"domain" => q.domain.set(val)?,
            b"node" => q.node.set(val)?,
            b"service" | b"port" => q.service.set(val)?,
            b"caps" => q.caps = parse_caps(val)?,
            b"ep" => {
                q.ep_type = match val {
                    b"msg" => sys::KFI_EP_MSG,
                    b"rdm" => sys::KFI_EP_RDM,
                    _ => return Err(EINVAL),
                }
            }
            b"format" => {
                q.format = match val {
                    b"in" => sys::KFI_SOCKADDR_IN,
                    b"in6" => sys::KFI_SOCKADDR_IN6,
                    _ => return Err(EINVAL),
                }
            }
            _ => return Err(EINVAL),
        }
    }
    Ok(q)
}

/// The write callback: new hints.
pub(crate) fn write(state: &State, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 256];
    let n = reader.len();
    if n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let q = parse(&buf[..n])?;
    *state.lock() = q;
    Ok(())
}

/// Prints the bits of `v` named in `names`, then any others in hex.
fn bits(f: &mut fmt::Formatter<'_>, v: u64, names: &[(&str, u64)]) -> fmt::Result {
    let mut rest = v;
    let mut sep = "";
    for (n, b) in names {
        if v & b != 0 {
            write!(f, "{sep}{n}")?;
            sep = "|";
            rest &= !b;
        }
    }
    if rest != 0 || v == 0 {
        write!(f, "{sep}{rest:#x}")?;
    }
    Ok(())
}

/// Prints a socket address of an entry.
///
/// # Safety
///
/// `addr` is NULL or holds `len` bytes.
unsafe fn sockaddr(f: &mut fmt::Formatter<'_>, addr: *const c_void, len: usize) -> fmt::Result {
    if addr.is_null() || len < 2 {
        return f.write_str("-");
    }
    // SAFETY: `len` bytes (safety requirement).
    let b = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) };
    let family = u16::from_ne_bytes([b[0], b[1]]);
    match (u32::from(family), b) {
        (kernel::bindings::AF_INET, [_, _, p0, p1, a, b1, c, d, ..]) => {
            write!(f, "{a}.{b1}.{c}.{d}:{}", u16::from_be_bytes([*p0, *p1]))
        }
        (kernel::bindings::AF_INET6, [_, _, p0, p1, _, _, _, _, rest @ ..]) if rest.len() >= 16 => {
            f.write_char('[')?;
            for (i, g) in rest[..16].chunks(2).enumerate() {
                let sep = if i == 0 { "" } else { ":" };
                write!(f, "{sep}{:x}", u16::from_be_bytes([g[0], g[1]]))?;
            }
            write!(f, "]:{}", u16::from_be_bytes([*p0, *p1]))
        }
        _ => write!(f, "family {family}, {len} bytes"),
    }
}

/// A C string field, or `-`.
///
/// # Safety
///
/// `s` is NULL or NUL-terminated.
unsafe fn cstr<'a>(s: *const c_char) -> &'a str {
    if s.is_null() {
        return "-";
    }
    // SAFETY: NUL-terminated (safety requirement).
    unsafe { CStr::from_char_ptr(s) }.to_str().unwrap_or("?")
}

/// Prints one entry, `fi_info -v` style.
///
/// # Safety
///
/// `i` is an entry of a `kfi_getinfo` list (its attributes are set).
unsafe fn entry(f: &mut fmt::Formatter<'_>, i: &sys::kfi_info) -> fmt::Result {
    // SAFETY: The attributes of a getinfo entry are its own (safety
    // requirement); its names are NULL or NUL-terminated.
    let (tx, rx, ep, dom, fab) = unsafe {
        (
            &*i.tx_attr,
            &*i.rx_attr,
            &*i.ep_attr,
            &*i.domain_attr,
            &*i.fabric_attr,
        )
    };
    // SAFETY: A getinfo entry's fabric and domain names are NULL or
    // NUL-terminated (safety requirement).
    let (prov, fname, dname) = unsafe { (cstr(fab.prov_name), cstr(fab.name), cstr(dom.name)) };
    writeln!(f, "provider: {prov}")?;
    writeln!(
        f,
        "    version: {}.{}",
        fab.prov_version >> 16,
        fab.prov_version & 0xffff
    )?;
    writeln!(f, "    fabric: {fname}")?;
    writeln!(f, "    domain: {dname}")?;
    let ep_type = match ep.type_ {
        sys::KFI_EP_MSG => "KFI_EP_MSG",
        sys::KFI_EP_RDM => "KFI_EP_RDM",
        _ => "KFI_EP_UNSPEC",
    };
    writeln!(f, "    type: {ep_type}")?;
    f.write_str("    caps: ")?;
    bits(f, i.caps, &CAPS)?;
    f.write_str("\n    src_addr: ")?;
    // SAFETY: An entry's addresses hold their lengths.
    unsafe { sockaddr(f, i.src_addr, i.src_addrlen) }?;
    f.write_str("\n    dest_addr: ")?;
    // SAFETY: An entry's destination address is NULL or holds
    // `dest_addrlen` bytes.
    unsafe { sockaddr(f, i.dest_addr, i.dest_addrlen) }?;
    writeln!(f)?;
    writeln!(f, "    max_msg_size: {}", ep.max_msg_size)?;
    writeln!(
        f,
        "    tx: size {} iov_limit {} rma_iov_limit {} inject_size {}",
        tx.size, tx.iov_limit, tx.rma_iov_limit, tx.inject_size
    )?;
    f.write_str("    tx op_flags: ")?;
    bits(
        f,
        tx.op_flags,
        &[
            ("inject", sys::KFI_INJECT),
            ("remote_cq_data", sys::KFI_REMOTE_CQ_DATA),
            ("inject_complete", sys::KFI_INJECT_COMPLETE),
            ("transmit_complete", sys::KFI_TRANSMIT_COMPLETE),
            ("delivery_complete", sys::KFI_DELIVERY_COMPLETE),
            ("commit_complete", sys::KFI_COMMIT_COMPLETE),
        ],
    )?;
    writeln!(f)?;
    writeln!(f, "    rx: size {} iov_limit {}", rx.size, rx.iov_limit)?;
    let progress = |p| match p {
        sys::KFI_PROGRESS_AUTO => "auto",
        sys::KFI_PROGRESS_MANUAL => "manual",
        _ => "unspec",
    };
    let threading = match dom.threading {
        sys::KFI_THREAD_SAFE => "safe",
        sys::KFI_THREAD_FID => "fid",
        sys::KFI_THREAD_DOMAIN => "domain",
        sys::KFI_THREAD_COMPLETION => "completion",
        sys::KFI_THREAD_ENDPOINT => "endpoint",
        _ => "unspec",
    };
    writeln!(
        f,
        "    threading: {threading} control_progress: {} data_progress: {}",
        progress(dom.control_progress),
        progress(dom.data_progress)
    )?;
    f.write_str("    mr_mode: ")?;
    bits(
        f,
        dom.mr_mode,
        &[
            ("local", sys::KFI_MR_LOCAL),
            ("virt_addr", sys::KFI_MR_VIRT_ADDR),
            ("prov_key", sys::KFI_MR_PROV_KEY),
        ],
    )?;
    writeln!(f)
}

/// The read callback: the entries that match the hints.
pub(crate) fn show(state: &State, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let q = *state.lock();
    // Hints on the stack: kfi_getinfo only reads them.
    let mut fabric = sys::kfi_fabric_attr {
        prov_name: q.provider.as_ptr().cast_mut(),
        name: q.fabric.as_ptr().cast_mut(),
        ..Default::default()
    };
    let mut domain = sys::kfi_domain_attr {
        name: q.domain.as_ptr().cast_mut(),
        ..Default::default()
    };
    let mut ep = sys::kfi_ep_attr {
        type_: q.ep_type,
        ..Default::default()
    };
    let hints = sys::kfi_info {
        caps: q.caps,
        addr_format: q.format,
        fabric_attr: &mut fabric,
        domain_attr: &mut domain,
        ep_attr: &mut ep,
        ..Default::default()
    };
    let mut list: *mut sys::kfi_info = core::ptr::null_mut();
    // SAFETY: Valid hints and strings that outlive the call; `list` is
    // written on success only.
    let r = unsafe {
        info::kfi_getinfo(
            sys::KFI_MAJOR_VERSION << 16 | sys::KFI_MINOR_VERSION,
            q.node.as_ptr(),
            q.service.as_ptr(),
            q.flags,
            &hints,
            &mut list,
        )
    };
    if r != 0 {
        return writeln!(
            f,
            "kfi_getinfo: {} ({r})",
            crate::strerror::text(r).to_str().unwrap_or("?")
        );
    }
    let mut cur = list;
    let mut out = Ok(());
    while !cur.is_null() && out.is_ok() {
        // SAFETY: An entry of the list kfi_getinfo returned.
        out = unsafe { entry(f, &*cur) };
        // SAFETY: `cur` is a non-NULL entry of the list kfi_getinfo returned,
        // not freed until `free_list` below.
        cur = unsafe { (*cur).next };
    }
    info::free_list(list);
    out
}
