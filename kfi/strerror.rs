// SPDX-License-Identifier: GPL-2.0

//! Texts for the errno values the kfi_* calls, the util queues and the
//! providers return, and for `KFI_EAVAIL`.

use kernel::error::{code::*, Error};

use crate::kfi_sys as sys;

/// One of kfabric's own codes (`KFI_ENOCQ`, ...) as an error.
fn kfi_code(code: u32) -> Error {
    Error::from_errno(-(code as i32))
}

/// Every error code of the API with its text.
fn known() -> [(Error, &'static core::ffi::CStr); 44] {
    [
        (EINVAL, c"invalid argument"),
        (ENOENT, c"no such entry"),
        (ENODEV, c"no such provider or device"),
        (ENOSYS, c"operation not implemented by the provider"),
        (EOPNOTSUPP, c"operation not supported"),
        (EEXIST, c"already exists"),
        (EBUSY, c"object in use"),
        (ENOMEM, c"out of memory"),
        (EAGAIN, c"resource temporarily unavailable"),
        (ETIMEDOUT, c"timed out"),
        (ECONNREFUSED, c"connection refused"),
        (ECONNRESET, c"connection reset by peer"),
        (ECONNABORTED, c"connection aborted"),
        (EIO, c"I/O error"),
        (ENODATA, c"no data available"),
        (ENOKEY, c"unknown memory region key"),
        (ERANGE, c"access outside the memory region"),
        (EACCES, c"access not permitted by the memory region"),
        (E2BIG, c"too many buffers or segments"),
        (EMSGSIZE, c"message too long for the buffer or the endpoint"),
        (ENOTCONN, c"endpoint not connected"),
        (EISCONN, c"endpoint already connected"),
        (ESHUTDOWN, c"endpoint shut down"),
        (EPIPE, c"connection closed"),
        (EPROTO, c"protocol error from the peer"),
        (ECANCELED, c"operation canceled"),
        (EOVERFLOW, c"completion queue overflowed"),
        (ENOSPC, c"queue full"),
        (EINTR, c"interrupted by a signal"),
        (EINPROGRESS, c"operation in progress"),
        (EALREADY, c"operation already in progress"),
        (EHOSTUNREACH, c"no route to host"),
        (ENETUNREACH, c"network unreachable"),
        (EADDRINUSE, c"address in use"),
        (EADDRNOTAVAIL, c"address not available"),
        (EAFNOSUPPORT, c"address family not supported"),
        (EFAULT, c"bad address"),
        (EPERM, c"operation not permitted"),
        (ENOBUFS, c"no buffer space available"),
        (ESRCH, c"no such object"),
        (
            crate::slot::eavail(),
            c"error entry available: read it with readerr",
        ),
        (kfi_code(sys::KFI_ENOEQ), c"no event queue bound"),
        (kfi_code(sys::KFI_ENOCQ), c"no completion queue bound"),
        (kfi_code(sys::KFI_ENOAV), c"no address vector bound"),
    ]
}

/// A short, static, NUL-terminated text for `errnum` (a negative errno or
/// `-KFI_EAVAIL`; a positive value, as in an error entry's `err`, is read
/// as its negation).
pub(crate) fn text(errnum: i32) -> &'static core::ffi::CStr {
    if errnum == 0 {
        return c"success";
    }
    let want = errnum.checked_abs().unwrap_or(0);
    known()
        .iter()
        .find(|(e, _)| e.to_errno() == -want)
        .map_or(c"unknown error", |(_, s)| *s)
}
