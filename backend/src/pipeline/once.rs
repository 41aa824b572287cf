//! Compiling each kernel at most once per process, for every target: one slot per key, so
//! threads launching the same kernel wait for one compile while other kernels compile in
//! parallel.
//!
//! One policy for poisoned locks: recover. A panic while compiling leaves its slot empty
//! (the value is stored only when complete), so the next launch compiles again instead of
//! failing forever.

use crate::Result;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

/// Values made at most once per key (compiled kernels).
pub(crate) struct OnceMap<K, V> {
    slots: OnceLock<Mutex<HashMap<K, Slot<V>>>>,
}

impl<K: Eq + Hash, V> OnceMap<K, V> {
    /// An empty map (for a `static`).
    pub(crate) const fn new() -> Self {
        OnceMap {
            slots: OnceLock::new(),
        }
    }

    /// The value of `key`, made by `make` unless another call made it first; an error is
    /// returned and not kept (the next call tries again).
    pub(crate) fn get_or_make(&self, key: K, make: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let slot = lock(self.slots.get_or_init(Default::default))
            .entry(key)
            .or_default()
            .clone();
        let mut entry = lock(&slot);
        if let Some(v) = entry.as_ref() {
            return Ok(v.clone());
        }
        let v = Arc::new(make()?);
        *entry = Some(v.clone());
        Ok(v)
    }
}

/// Locks `m`, recovering from poisoning (see the module docs).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::OnceMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Threads asking for one key make it once; an error is not kept; a panic while
    /// making leaves the key usable.
    #[test]
    fn made_once_errors_retried_panics_recovered() {
        static MAP: OnceMap<u32, usize> = OnceMap::new();
        static MADE: AtomicUsize = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let v = MAP.get_or_make(1, || Ok(MADE.fetch_add(1, Ordering::SeqCst)));
                    assert_eq!(*v.unwrap(), 0);
                });
            }
        });
        assert_eq!(MADE.load(Ordering::SeqCst), 1);
        let failed = MAP.get_or_make(2, || {
            Err(crate::Error::Compile {
                kernel: "k".into(),
                message: "boom".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(*MAP.get_or_make(2, || Ok(7)).unwrap(), 7);
        let panicked = std::panic::catch_unwind(|| MAP.get_or_make(3, || panic!("in make")));
        assert!(panicked.is_err());
        assert_eq!(*MAP.get_or_make(3, || Ok(9)).unwrap(), 9);
    }
}
