//! What `#[autotune]` kernels call: [`launch_tuned`] picks the config and launches with
//! it, resetting and restoring the buffers the kernel writes in place between timed runs
//! (Triton's `reset_to_zero` and `restore_value`); [`ConfigValue`] and [`KeyValue`] turn
//! config values and key arguments into the tuner's `i64`s.

use super::{Autotuner, Config};
use crate::backend::launch::contents;
use crate::backend::KernelArgs;
use crate::{Device, Error, Result};
use tritium_dsl::DType;

/// Buffers an autotuned kernel writes in place, by parameter name.
#[derive(Debug, Clone, Copy, Default)]
pub struct InPlace<'n> {
    /// Zeroed before every timed run and before the launch after tuning (Triton's
    /// `reset_to_zero`: outputs the kernel accumulates into).
    pub reset_to_zero: &'n [&'n str],
    /// Saved before tuning and written back after every timed run (Triton's
    /// `restore_value`: inputs the kernel updates).
    pub restore_value: &'n [&'n str],
}

/// Launches `kernel` with `tuner`'s best config for `key` on `device`, timing every config
/// the first time (see [`Autotuner::choose`]). `launch` runs the kernel with one config
/// and a borrow of `args`.
pub fn launch_tuned(
    kernel: &str,
    tuner: &Autotuner,
    device: &Device,
    key: &[i64],
    in_place: InPlace<'_>,
    args: KernelArgs<'_>,
    launch: impl Fn(&Config, KernelArgs<'_>) -> Result<()>,
) -> Result<()> {
    if let Some(c) = tuner.chosen(device, key) {
        return launch(&c, args);
    }
    let buffers = |names: &[&str]| {
        names
            .iter()
            .map(|n| contents::writable_buffer(kernel, &args, n))
            .collect::<Result<Vec<_>>>()
    };
    let resets = buffers(in_place.reset_to_zero)?;
    let restores = buffers(in_place.restore_value)?;
    let saved = restores
        .iter()
        .map(|b| contents::save(device, b))
        .collect::<Result<Vec<_>>>()?;
    let restore_all = || -> Result<()> {
        for (b, bytes) in restores.iter().zip(&saved) {
            contents::restore(device, b, bytes)?;
        }
        Ok(())
    };
    let zero_all = || -> Result<()> {
        for b in &resets {
            contents::zero(device, b)?;
        }
        Ok(())
    };
    let mut timed = false;
    let config = tuner.choose(device, key, |c| {
        timed = true;
        zero_all()?;
        let ran = launch(c, args.reborrow());
        restore_all()?;
        ran
    })?;
    if timed {
        // As Triton: the real launch sees the inputs as given and zeroed outputs.
        restore_all()?;
        zero_all()?;
    }
    launch(&config, args)
}

/// A constexpr type a config value converts to.
pub trait ConfigValue: Sized {
    /// `v` as this type, if it fits.
    fn from_config(v: i64) -> Option<Self>;
}

macro_rules! int_config_value {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn from_config(v: i64) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
        }
    )*};
}
int_config_value!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl ConfigValue for bool {
    fn from_config(v: i64) -> Option<Self> {
        match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// Constexpr `name` of `config` as `T`: an error naming the kernel when the config has no
/// such value (a pruning function may build configs) or it does not fit `T`.
pub fn config_value<T: ConfigValue>(kernel: &str, config: &Config, name: &str) -> Result<T> {
    let err = |message: String| Error::Launch {
        kernel: kernel.to_string(),
        message,
    };
    let v = config.value(name).ok_or_else(|| {
        err(format!(
            "autotune config {config} has no value for `{name}`"
        ))
    })?;
    T::from_config(v).ok_or_else(|| {
        err(format!(
            "autotune config {config}: {name} = {v} does not fit `{}`",
            std::any::type_name::<T>()
        ))
    })
}

/// An argument an autotuning key holds.
pub trait KeyValue {
    /// The key's entry for this value.
    fn key_value(&self) -> i64;
}

macro_rules! int_key_value {
    ($($t:ty),*) => {$(
        impl KeyValue for $t {
            fn key_value(&self) -> i64 {
                *self as i64
            }
        }
    )*};
}
int_key_value!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, bool);

impl KeyValue for f32 {
    fn key_value(&self) -> i64 {
        self.to_bits() as i64
    }
}

impl KeyValue for f64 {
    fn key_value(&self) -> i64 {
        self.to_bits() as i64
    }
}

impl KeyValue for DType {
    /// A generic kernel's dtype: its position in [`DType::ALL`].
    fn key_value(&self) -> i64 {
        DType::ALL
            .iter()
            .position(|d| d == self)
            .map_or(-1, |i| i as i64)
    }
}
