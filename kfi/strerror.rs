// SPDX-License-Identifier: GPL-2.0

//! Texts for the errno values the kfi_* calls return.

use kernel::error::{code::*, Error};

/// A short, static, NUL-terminated text for `errnum` (a negative errno).
pub(crate) fn text(errnum: i32) -> &'static core::ffi::CStr {
    let known: [(Error, &'static core::ffi::CStr); 14] = [
        (EINVAL, c"invalid argument"),
        (ENOENT, c"no such entry"),
        (ENODEV, c"no such provider"),
        (ENOSYS, c"operation not implemented by the provider"),
        (EOPNOTSUPP, c"operation not supported"),
        (EEXIST, c"already exists"),
        (EBUSY, c"object in use"),
        (ENOMEM, c"out of memory"),
        (EAGAIN, c"resource temporarily unavailable"),
        (ETIMEDOUT, c"timed out"),
        (ECONNREFUSED, c"connection refused"),
        (ECONNRESET, c"connection reset by peer"),
        (EIO, c"I/O error"),
        (ENODATA, c"no data available"),
    ];
    if errnum == 0 {
        return c"success";
    }
    known
        .iter()
        .find(|(e, _)| e.to_errno() == errnum)
        .map_or(c"unknown error", |(_, s)| *s)
}
