// SPDX-License-Identifier: GPL-2.0

//! The sending half of [`Socket`] (`ksock.rs`): `kernel_sendmsg` with
//! deadlines, pacing, non-waiting sends and sends by page reference.
//!
//! Every call here may sleep: process context only.

use core::mem::MaybeUninit;
use kernel::{bindings, prelude::*};

use super::{Dir, SendPages, Socket, Wait};

impl Socket {
    /// Sends all of `bufs`, in order; returns the bytes sent (all of
    /// them), the socket's error if the connection failed on the way,
    /// `ETIMEDOUT` if the send deadline passed before all were sent.
    pub(crate) fn send(&self, bufs: &[&[u8]]) -> Result<usize> {
        self.send_from(bufs, 0, Wait::Deadline)
    }

    /// Sends `bufs` but their first `skip` bytes (sent before), in order;
    /// returns the bytes of this call. [`Wait::Deadline`]: all of them
    /// (the socket's error if the connection failed on the way,
    /// `ETIMEDOUT` if the send deadline passed first). [`Wait::No`]: what
    /// the socket takes now, maybe nothing (0), never waiting for the peer
    /// to read (it may wait for the socket's lock, which only this host's
    /// threads hold).
    pub(crate) fn send_from(&self, bufs: &[&[u8]], skip: usize, wait: Wait) -> Result<usize> {
        self.send_split(bufs, None, skip, wait, false)
    }

    /// [`Self::send_from`], but the buffers from index `by_ref.0` on go
    /// through `by_ref.1` (the provider's send by page reference); the
    /// ones before are copied, with `MSG_MORE` when more follow. With
    /// `more`, the last bytes go with `MSG_MORE` too: the caller sends
    /// more at once, and TCP holds a segment that is not full for them
    /// (the caller's next send without it pushes them out).
    pub(crate) fn send_split(
        &self,
        bufs: &[&[u8]],
        by_ref: Option<(usize, SendPages)>,
        skip: usize,
        wait: Wait,
        more: bool,
    ) -> Result<usize> {
        let total = bufs
            .iter()
            .try_fold(0usize, |t, b| t.checked_add(b.len()))
            .ok_or(EINVAL)?;
        let mut sent = 0usize;
        loop {
            let at = skip.checked_add(sent).ok_or(EINVAL)?;
            if at >= total {
                return Ok(sent);
            }
            let (n, left) = self.send_next(bufs, by_ref, at, total, wait, more)?;
            sent += n;
            // A waiting call that took part of the bytes was cut short: by
            // its timeout, which may run out a jiffy before the deadline
            // (the next call then waits out the rest, or finds the
            // deadline passed: `ETIMEDOUT`), or by a failure that the next
            // call returns.
            if n == 0 || (wait == Wait::No && n < left) {
                return Ok(sent);
            }
        }
    }

    /// One send call from byte `at` of `bufs` (`total` bytes): the copied
    /// buffers up to the first one sent by reference, or the rest of the
    /// one by reference that holds byte `at`. Returns the bytes it took
    /// and the bytes there were to take. `more`: as for
    /// [`Self::send_split`].
    fn send_next(
        &self,
        bufs: &[&[u8]],
        by_ref: Option<(usize, SendPages)>,
        at: usize,
        total: usize,
        wait: Wait,
        more: bool,
    ) -> Result<(usize, usize)> {
        let Some((first, pages)) = by_ref.filter(|(i, _)| *i < bufs.len()) else {
            return self.send_once(bufs, at, wait, more);
        };
        let (copied, refs) = bufs.split_at(first);
        let head: usize = copied.iter().map(|b| b.len()).sum();
        if at < head {
            return self.send_once(copied, at, wait, true);
        }
        let mut skip = at - head;
        let mut end = head;
        for b in refs {
            end += b.len();
            let Some(rest) = b.get(skip..).filter(|r| !r.is_empty()) else {
                skip -= b.len().min(skip);
                continue;
            };
            let rest = rest.get(..self.tx_cap(wait, rest.len())).ok_or(EINVAL)?;
            let more = if end - b.len() + skip + rest.len() < total || more {
                bindings::MSG_MORE
            } else {
                0
            };
            let timed = self.arm_for(wait)?;
            let n = pages(self, rest, Self::flags(wait) | more);
            return self.sent(self.took(n, rest.len(), timed, wait));
        }
        Ok((0, 0))
    }

    /// The most bytes of `len` one send that waits as `wait` says may
    /// offer: a paced deadline ([`Self::set_tx_deadline_paced`]) moves
    /// between calls only.
    fn tx_cap(&self, wait: Wait, len: usize) -> usize {
        match wait {
            Wait::Deadline => self.tx_pace.limit(len),
            Wait::No => len,
        }
    }

    /// Counts a send's bytes towards a paced deadline; returns `took` as
    /// it is.
    fn sent(&self, took: Result<(usize, usize)>) -> Result<(usize, usize)> {
        if let Ok((n, _)) = took {
            self.tx_pace.went(n, &self.tx_deadline);
        }
        took
    }

    /// The flags of a send that waits as `wait` says.
    fn flags(wait: Wait) -> c_uint {
        match wait {
            Wait::No => bindings::MSG_NOSIGNAL | bindings::MSG_DONTWAIT,
            Wait::Deadline => bindings::MSG_NOSIGNAL,
        }
    }

    /// Before a send that waits as `wait` says: its timeout armed (true if
    /// a deadline bounds it).
    fn arm_for(&self, wait: Wait) -> Result<bool> {
        match wait {
            Wait::Deadline => self.arm(Dir::Tx),
            Wait::No => Ok(false),
        }
    }

    /// A send call's result `n` for `total` bytes offered: the bytes taken
    /// and `total`.
    fn took(&self, n: c_int, total: usize, timed: bool, wait: Wait) -> Result<(usize, usize)> {
        if matches!(wait, Wait::No) && n == -(bindings::EAGAIN as c_int) {
            // The socket is full: nothing taken.
            return Ok((0, total));
        }
        let sent = Self::timed(n, timed)?;
        if sent < total && timed && self.deadline_passed(Dir::Tx) {
            return Err(ETIMEDOUT);
        }
        Ok((sent, total))
    }

    /// One `kernel_sendmsg` of `bufs` but their first `skip` bytes, as
    /// [`Self::send_from`] waits, with `MSG_MORE` if `more` bytes follow:
    /// the bytes it took and the bytes there were to take.
    fn send_once(
        &self,
        bufs: &[&[u8]],
        mut skip: usize,
        wait: Wait,
        more: bool,
    ) -> Result<(usize, usize)> {
        /// Buffers of one send described on the stack.
        const IOV_ON_STACK: usize = 9;
        let timed = self.arm_for(wait)?;
        // On the stack unless there are many buffers: no allocation per
        // send for the usual frames. Only the entries used are written (a
        // send's every byte written counts on a small message's path).
        let mut short = [const { MaybeUninit::<bindings::kvec>::uninit() }; IOV_ON_STACK];
        let mut long = KVec::new();
        let iov: &mut [MaybeUninit<bindings::kvec>] = if bufs.len() <= IOV_ON_STACK {
            &mut short
        } else {
            long.resize(bufs.len(), MaybeUninit::uninit(), GFP_KERNEL)?;
            &mut long
        };
        // The first `count` entries of `iov` are written.
        let mut count = 0;
        let mut total = 0;
        let cap = self.tx_cap(wait, usize::MAX);
        // Bytes left out that follow the call's.
        let mut cut = false;
        for b in bufs {
            let Some(rest) = b.get(skip..) else {
                skip -= b.len();
                continue;
            };
            skip = 0;
            if rest.is_empty() {
                continue;
            }
            let room = cap - total;
            if room < rest.len() {
                cut = true;
            }
            let rest = rest.get(..room.min(rest.len())).ok_or(EINVAL)?;
            if rest.is_empty() {
                break;
            }
            let Some(v) = iov.get_mut(count) else {
                return Err(EINVAL);
            };
            v.write(bindings::kvec {
                iov_base: rest.as_ptr().cast_mut().cast(),
                iov_len: rest.len(),
            });
            count += 1;
            total += rest.len();
            if cut {
                break;
            }
        }
        if total == 0 {
            return Ok((0, 0));
        }
        let more = if more || cut { bindings::MSG_MORE } else { 0 };
        let mut msg = bindings::msghdr {
            msg_flags: Self::flags(wait) | more,
            ..Default::default()
        };
        // A `MaybeUninit<kvec>` is laid out as a kvec.
        // SAFETY: A live socket; the first `count` kvecs of `iov` are written and
        // describe the borrowed `total` bytes, which the call only reads (no other entry).
        let n = unsafe {
            bindings::kernel_sendmsg(
                self.sock.as_ptr(),
                &mut msg,
                iov.as_mut_ptr().cast::<bindings::kvec>(),
                count,
                total,
            )
        };
        self.sent(self.took(n, total, timed, wait))
    }
}
