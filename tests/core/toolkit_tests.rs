// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `kfi_toolkit`: the provider toolkit's data structures
//! (`kfi/api/toolkit/`), driven the way a provider drives them.

use kernel::prelude::*;

#[kunit_tests(kfi_toolkit)]
mod tests {
    use crate::kfi::{
        kfi_sys as sys,
        ring::Ring,
        toolkit::{
            handles::HandleTable,
            tags::{matches, Limits, Matched, Reservation, Room, TagMatcher},
        },
    };
    use kernel::{error::code::*, prelude::*};

    /// Receives and messages are numbers in these tests.
    type Matcher = TagMatcher<u32, u32>;

    fn matcher(posted: usize, held: usize, held_bytes: usize) -> Result<Matcher> {
        TagMatcher::new(Limits {
            posted,
            held,
            held_bytes,
            source_held: held,
            source_bytes: held_bytes,
        })
    }

    /// The room for a message of `bytes`; fails the test if there is none.
    fn reserve(m: &mut Matcher, bytes: usize) -> Result<Reservation> {
        match m.reserve(bytes) {
            Room::Reserved(r) => Ok(r),
            Room::Full | Room::Never => Err(ENOSPC),
        }
    }

    /// Holds message `msg` tagged `tag` of `bytes`; `Ok(true)` if held,
    /// `Ok(false)` if a posted receive took it.
    fn hold(m: &mut Matcher, tag: u64, bytes: usize, msg: u32) -> Result<bool> {
        let r = reserve(m, bytes)?;
        Ok(m.hold(r, tag, msg)?.is_none())
    }

    fn pair(x: Option<Matched<u32, u32>>) -> Option<(u32, u64, u32)> {
        x.map(|m| (m.recv, m.tag, m.msg))
    }

    /// Handles name their own request, once; anything else is refused.
    #[test]
    fn handles_are_checked() -> Result {
        let mut t = HandleTable::<u32>::new();
        let a = t.insert(1, 10)?;
        let b = t.insert(2, 10)?;
        assert!(!core::ptr::eq(a, b));
        assert_eq!(t.len(), 2);
        assert_eq!(t.take(b), Ok(2));
        // Answered already: stale.
        assert_eq!(t.take(b), Err(EINVAL));
        // Made up: never dereferenced, only compared.
        let mut fake = sys::kfid::default();
        assert_eq!(t.take(&raw mut fake), Err(EINVAL));
        assert_eq!(t.take(core::ptr::null_mut()), Err(EINVAL));
        assert_eq!(t.take(a), Ok(1));
        assert!(t.is_empty());
        // A handle is never handed out again, though its request's memory
        // is (a stale handle must not take another request), and never
        // points to a kfid.
        let c = t.insert(3, 10)?;
        assert!(!core::ptr::eq(c, a) && !core::ptr::eq(c, b));
        assert_eq!(c.addr() % 2, 1);
        assert_eq!((t.take(a), t.take(b)), (Err(EINVAL), Err(EINVAL)));
        assert_eq!(t.take(c), Ok(3));
        Ok(())
    }

    /// A closing owner takes back its requests and only its own.
    #[test]
    fn handles_drain_by_owner() -> Result {
        let mut t = HandleTable::<u32>::new();
        t.insert(1, 10)?;
        let other = t.insert(2, 20)?;
        t.insert(3, 10)?;
        let mut mine = KVec::new();
        while let Some(v) = t.take_owned_by(10) {
            mine.push(v, GFP_KERNEL)?;
        }
        // In either order.
        assert!(mine[..] == [1, 3] || mine[..] == [3, 1]);
        assert_eq!(t.len(), 1);
        // The other owner's handle still works.
        assert_eq!(t.take(other), Ok(2));
        assert_eq!(t.take_owned_by(20), None);
        Ok(())
    }

    /// A device's removal takes the requests that match, whatever their
    /// owner; their handles go stale, the others stay valid.
    #[test]
    fn handles_take_where() -> Result {
        let mut t = HandleTable::<u32>::new();
        let a = t.insert(5, 10)?;
        let b = t.insert(6, 20)?;
        let c = t.insert(7, 10)?;
        let mut odd = KVec::new();
        while let Some(v) = t.take_where(|v| v % 2 == 1) {
            odd.push(v, GFP_KERNEL)?;
        }
        assert!(odd[..] == [5, 7] || odd[..] == [7, 5]);
        assert_eq!((t.take(a), t.take(c)), (Err(EINVAL), Err(EINVAL)));
        assert_eq!(t.take(b), Ok(6));
        Ok(())
    }

    /// Unload empties the table (and frees it) whoever owns what.
    #[test]
    fn handles_take_any_empties() -> Result {
        let mut t = HandleTable::<u32>::new();
        let a = t.insert(1, 10)?;
        t.insert(2, 20)?;
        let mut n = 0;
        while t.take_any().is_some() {
            n += 1;
        }
        assert_eq!(n, 2);
        assert!(t.is_empty());
        assert_eq!(t.take(a), Err(EINVAL));
        // Usable again after being emptied.
        let c = t.insert(3, 30)?;
        assert_eq!(t.take(c), Ok(3));
        Ok(())
    }

    /// A cancel takes back the oldest posted receive it names, and only
    /// a posted one.
    #[test]
    fn tags_cancel_posted() -> Result {
        let mut m = matcher(4, 4, 1 << 20)?;
        assert!(m.post(1, 0, 10)?.is_none());
        assert!(m.post(2, 0, 20)?.is_none());
        assert_eq!(m.cancel_where(|&r| r == 20), Some(20));
        assert_eq!(m.cancel_where(|&r| r == 20), None);
        // A message tagged 2 finds nothing posted now; tag 1 still does,
        // and looking leaves it posted.
        assert!(!m.is_posted(2));
        assert!(m.is_posted(1));
        assert!(m.is_posted(1));
        assert_eq!(m.take_posted(2), None);
        assert_eq!(m.take_posted(1), Some(10));
        assert!(!m.is_posted(1));
        Ok(())
    }

    /// A tag matches outside the ignore mask only.
    #[test]
    fn tags_match_outside_ignore() {
        assert!(matches(0x13, 0x10, 0x0f));
        assert!(!matches(0x23, 0x10, 0x0f));
        assert!(matches(7, 7, 0));
        assert!(!matches(6, 7, 0));
        assert!(matches(u64::MAX, 0, u64::MAX));
    }

    /// Messages take posted receives in posting order.
    #[test]
    fn tags_match_in_posting_order() -> Result {
        let mut m = matcher(4, 4, 100)?;
        assert!(m.post(1, 0, 10)?.is_none());
        assert!(m.post(2, 0, 20)?.is_none());
        assert!(m.post(1, 0, 11)?.is_none());
        assert_eq!(m.take_posted(1), Some(10));
        assert_eq!(m.take_posted(1), Some(11));
        assert_eq!(m.take_posted(1), None);
        assert_eq!(m.take_posted(2), Some(20));
        assert_eq!(m.len(), (0, 0));
        Ok(())
    }

    /// A receive takes the oldest matching held message.
    #[test]
    fn tags_held_oldest_first() -> Result {
        let mut m = matcher(4, 4, 100)?;
        assert!(hold(&mut m, 5, 10, 1)?);
        assert!(hold(&mut m, 6, 10, 2)?);
        assert!(hold(&mut m, 5, 10, 3)?);
        assert_eq!(m.held_bytes(), 30);
        assert_eq!(pair(m.post(5, 0, 50)?), Some((50, 5, 1)));
        assert_eq!(pair(m.post(4, 3, 51)?), Some((51, 6, 2)));
        assert_eq!(pair(m.post(5, 0, 52)?), Some((52, 5, 3)));
        assert_eq!(m.held_bytes(), 0);
        // Nothing held: the receive waits.
        assert!(m.post(5, 0, 53)?.is_none());
        assert_eq!(m.len(), (1, 0));
        Ok(())
    }

    /// A receive posted while a message is read takes it when held.
    #[test]
    fn tags_hold_meets_late_receive() -> Result {
        let mut m = matcher(4, 4, 100)?;
        let r = reserve(&mut m, 10)?;
        assert!(m.post(9, 0, 90)?.is_none());
        assert_eq!(pair(m.hold(r, 9, 7)?), Some((90, 9, 7)));
        assert_eq!(m.len(), (0, 0));
        // Its room is free again.
        assert!(hold(&mut m, 1, 100, 8)?);
        Ok(())
    }

    /// The unexpected queue is bounded in messages, reservations count.
    #[test]
    fn tags_bound_messages() -> Result {
        let mut m = matcher(4, 2, 100)?;
        let r = reserve(&mut m, 1)?;
        // Never given back: counts for good.
        assert!(matches!(m.reserve(1), Room::Reserved(_)));
        // Two reserved: full, but room will come.
        assert!(matches!(m.reserve(1), Room::Full));
        m.release(r);
        assert!(hold(&mut m, 1, 1, 1)?);
        assert!(matches!(m.reserve(1), Room::Full));
        Ok(())
    }

    /// The unexpected queue is bounded in bytes; a message larger than the
    /// bound is never held.
    #[test]
    fn tags_bound_bytes() -> Result {
        let mut m = matcher(4, 8, 100)?;
        assert!(matches!(m.reserve(101), Room::Never));
        let a = reserve(&mut m, 60)?;
        assert!(matches!(m.reserve(41), Room::Full));
        // Exactly the bound.
        let b = reserve(&mut m, 40)?;
        m.release(a);
        // 40 still reserved: 61 does not fit, 60 does.
        assert!(matches!(m.reserve(61), Room::Full));
        let c = reserve(&mut m, 60)?;
        m.release(b);
        // Not never while anything is reserved: room will come.
        assert!(matches!(m.reserve(101), Room::Full));
        m.release(c);
        assert!(matches!(m.reserve(101), Room::Never));
        Ok(())
    }

    /// Sources sharing a matcher get a share each: one source that used
    /// its share waits while another still finds room; a message larger
    /// than a share waits even in an empty queue, and only one larger
    /// than the whole queue is never held.
    #[test]
    fn tags_share_per_source() -> Result {
        let mut m = TagMatcher::<u32, u32>::new(Limits {
            posted: 4,
            held: 8,
            held_bytes: 100,
            source_held: 2,
            source_bytes: 25,
        })?;
        assert!(matches!(m.reserve_from(40, 1), Room::Full));
        assert!(matches!(m.reserve_from(101, 1), Room::Never));
        let a1 = match m.reserve_from(20, 1) {
            Room::Reserved(r) => r,
            _ => return Err(ENOSPC),
        };
        // Source 1 would hold more than its bytes: no more for it.
        assert!(matches!(m.reserve_from(6, 1), Room::Full));
        let b1 = match m.reserve_from(10, 2) {
            Room::Reserved(r) => r,
            _ => return Err(ENOSPC),
        };
        let b2 = match m.reserve_from(10, 2) {
            Room::Reserved(r) => r,
            _ => return Err(ENOSPC),
        };
        // Two messages: source 2's share is used, source 3's is not.
        assert!(matches!(m.reserve_from(1, 2), Room::Full));
        assert!(matches!(m.reserve_from(1, 3), Room::Reserved(_)));
        assert!(m.hold(b1, 5, 50)?.is_none());
        // A posted receive takes the held message: room for source 2.
        assert_eq!(pair(m.post(5, 0, 51)?), Some((51, 5, 50)));
        assert!(matches!(m.reserve_from(1, 2), Room::Reserved(_)));
        m.release(a1);
        m.release(b2);
        Ok(())
    }

    /// Posted receives are bounded: the next one is `EAGAIN`.
    #[test]
    fn tags_bound_posted() -> Result {
        let mut m = matcher(2, 2, 100)?;
        assert!(m.post(1, 0, 1)?.is_none());
        assert!(m.post(1, 0, 2)?.is_none());
        assert!(matches!(m.post(1, 0, 3), Err(e) if e == EAGAIN));
        // A held match needs no room among the posted.
        assert_eq!(m.take_posted(1), Some(1));
        assert_eq!(m.take_posted(1), Some(2));
        assert!(hold(&mut m, 2, 1, 4)?);
        assert!(m.post(1, 0, 5)?.is_none());
        assert!(m.post(1, 0, 6)?.is_none());
        assert_eq!(pair(m.post(2, 0, 7)?), Some((7, 2, 4)));
        Ok(())
    }

    /// Closing returns the posted receives in order and drops the rest.
    #[test]
    fn tags_take_all() -> Result {
        let mut m = matcher(4, 4, 100)?;
        assert!(m.post(1, 0, 1)?.is_none());
        assert!(m.post(2, 0, 2)?.is_none());
        assert!(hold(&mut m, 3, 10, 3)?);
        let c = m.take_all();
        let mut got = KVec::new();
        for r in c.iter() {
            got.push(*r, GFP_KERNEL)?;
        }
        assert_eq!(&got[..], &[1, 2]);
        assert_eq!(m.len(), (0, 0));
        assert_eq!(m.held_bytes(), 0);
        Ok(())
    }

    /// A growing ring keeps its order across growth (also with its head
    /// wrapped), stops at its bound, and shrinks back only when empty.
    #[test]
    fn ring_grows_in_order_and_shrinks_when_empty() -> Result {
        let mut r = Ring::<u32>::growing(2, 8)?;
        assert_eq!(r.room_now(), 2);
        // Wrap the head before growing.
        r.push(1)?;
        r.push(2)?;
        assert_eq!(r.pop_front(), Some(1));
        r.push(3)?;
        for v in 4..=9 {
            r.push(v)?;
        }
        assert_eq!(r.room_now(), 8);
        // Full at the bound: the slot comes back.
        assert_eq!(r.try_push(10), Err(10));
        // Not empty: no shrinking.
        r.shrink();
        assert_eq!(r.room_now(), 8);
        for v in 2..=9 {
            assert_eq!(r.pop_front(), Some(v));
        }
        assert_eq!(r.pop_front(), None);
        r.shrink();
        assert_eq!(r.room_now(), 2);
        r.push(11)?;
        assert_eq!(r.front(), Some(&11));
        // A fixed ring never grows.
        let mut f = Ring::<u32>::new(1)?;
        f.push(1)?;
        assert_eq!(f.try_push(2), Err(2));
        assert!(Ring::<u32>::growing(0, 4).is_err());
        assert!(Ring::<u32>::growing(5, 4).is_err());
        Ok(())
    }
}
