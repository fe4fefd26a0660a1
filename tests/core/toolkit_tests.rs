// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `kfi_toolkit`: the provider toolkit's data structures
//! (`kfi/api/toolkit/`), driven the way a provider drives them.

use kernel::prelude::*;

#[kunit_tests(kfi_toolkit)]
mod tests {
    use crate::kfi::{kfi_sys as sys, toolkit::handles::HandleTable};
    use kernel::{error::code::*, prelude::*};

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
        mine.sort_unstable();
        assert_eq!(&mine[..], &[1, 3]);
        assert_eq!(t.len(), 1);
        // The other owner's handle still works.
        assert_eq!(t.take(other), Ok(2));
        assert_eq!(t.take_owned_by(20), None);
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
}
