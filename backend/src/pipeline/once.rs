//! Compiling each kernel at most once per process, for every target: one slot per key, so
//! threads launching the same kernel wait for one compile while other kernels compile in
//! parallel.
//!
//! One policy for poisoned locks: recover. A panic while compiling leaves its slot empty
//! (the value is stored only when complete), so the next launch compiles again instead of
//! failing forever.

use crate::Result;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

/// Keys by their hash: a lookup hashes and compares a borrowed form of the key, and the key
/// is built (cloned) only when its slot is made. Cloning and SipHashing the key were half
/// of a cached launch's time.
type Buckets<K, V> = HashMap<u64, Vec<(K, Slot<V>)>, BuildHasherDefault<FastHasher>>;

/// Values made at most once per key (compiled kernels).
pub(crate) struct OnceMap<K, V> {
    slots: OnceLock<Mutex<Buckets<K, V>>>,
}

impl<K: Eq + Hash + Clone, V> OnceMap<K, V> {
    /// An empty map (for a `static`).
    pub(crate) const fn new() -> Self {
        OnceMap {
            slots: OnceLock::new(),
        }
    }

    /// The value of `key`, made by `make` unless another call made it first; an error is
    /// returned and not kept (the next call tries again).
    pub(crate) fn get_or_make(&self, key: K, make: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        self.get_or_make_like(&key, |k| *k == key, || key.clone(), make)
    }

    /// [`OnceMap::get_or_make`] for the key that `like` hashes as (the key's fields by
    /// reference) and `is` recognizes; `key` builds it when it has no slot yet. Every
    /// lookup of one map must hash the same form.
    pub(crate) fn get_or_make_like(
        &self,
        like: &impl Hash,
        is: impl Fn(&K) -> bool,
        key: impl FnOnce() -> K,
        make: impl FnOnce() -> Result<V>,
    ) -> Result<Arc<V>> {
        let mut hasher = FastHasher::default();
        like.hash(&mut hasher);
        let slot = {
            let mut map = lock(self.slots.get_or_init(Default::default));
            let bucket = map.entry(hasher.finish()).or_default();
            match bucket.iter().find(|(k, _)| is(k)) {
                Some((_, slot)) => slot.clone(),
                None => {
                    let slot = Slot::default();
                    bucket.push((key(), slot.clone()));
                    slot
                }
            }
        };
        let mut entry = lock(&slot);
        if let Some(v) = entry.as_ref() {
            return Ok(v.clone());
        }
        let v = Arc::new(make()?);
        *entry = Some(v.clone());
        Ok(v)
    }
}

/// A multiply-rotate hash of 8-byte words (as rustc's `FxHasher`): keys are the process's
/// own kernels, not input from outside, so SipHash's resistance to chosen collisions buys
/// nothing here.
#[derive(Default)]
struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn finish(&self) -> u64 {
        self.0
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

    /// A key that hashes to the same word as every other: all share one bucket.
    #[derive(Clone, PartialEq, Eq)]
    struct Colliding(String);

    impl std::hash::Hash for Colliding {
        fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
    }

    /// Looked up by a borrowed form, a key is built once, when its slot is made; keys in
    /// one bucket keep their own values.
    #[test]
    fn keys_found_by_reference_are_built_once_and_kept_apart() {
        static MAP: OnceMap<(String, u32), u32> = OnceMap::new();
        let built = AtomicUsize::new(0);
        let get = |name: &str, n: u32, value: u32| {
            MAP.get_or_make_like(
                &(name, &n),
                |k| k.0 == name && k.1 == n,
                || {
                    built.fetch_add(1, Ordering::SeqCst);
                    (name.to_string(), n)
                },
                || Ok(value),
            )
        };
        assert_eq!(*get("add", 1, 10).unwrap(), 10);
        assert_eq!(*get("add", 1, 99).unwrap(), 10);
        assert_eq!(*get("add", 2, 20).unwrap(), 20);
        assert_eq!(built.load(Ordering::SeqCst), 2);
        // The owned form hashes as the borrowed one: the same slot.
        assert_eq!(
            *MAP.get_or_make(("add".to_string(), 2), || Ok(0)).unwrap(),
            20
        );
        static SAME: OnceMap<Colliding, usize> = OnceMap::new();
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            assert_eq!(
                *SAME.get_or_make(Colliding(name.into()), || Ok(i)).unwrap(),
                i
            );
        }
        assert_eq!(
            *SAME.get_or_make(Colliding("b".into()), || Ok(7)).unwrap(),
            1
        );
    }
}
