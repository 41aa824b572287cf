//! Autotuning as Triton's `@triton.autotune`, in a Rust form: an [`Autotuner`] holds the
//! candidate [`Config`]s of one kernel; [`Autotuner::run`] benchmarks every config the
//! first time it sees a key (the values the best config depends on, Triton's `key`),
//! keeps the fastest in memory and on disk (`<cache root>/autotune/`, keyed by the
//! tuner's name, the configs, the key and the device), and launches with it.
//!
//! The launch closure runs many times while tuning: a kernel that accumulates into its
//! output must reset it inside the closure. Kernels declared with `#[autotune(...)]` get
//! all of this generated, `reset_to_zero`/`restore_value` included ([`launch_tuned`]).
//! `TRITIUM_PRINT_AUTOTUNING=1` prints each choice with every config's time.

mod tuned;

pub use tuned::{config_value, launch_tuned, ConfigValue, InPlace, KeyValue};

use crate::testing::{do_bench, BenchOptions, BenchResult};
use crate::{Device, Error, Result};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// One candidate: named constexpr values and launch options (Triton's `triton.Config`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Config {
    /// Constexpr values by name, e.g. `("BLOCK", 1024)`.
    pub values: Vec<(String, i64)>,
    /// Warps per program on CUDA.
    pub num_warps: u32,
    /// Software-pipelining stages on CUDA (see `LaunchOptions::num_stages`).
    pub num_stages: u32,
}

impl Config {
    /// A config of these constexpr values, 4 warps and 3 stages (Triton's defaults).
    pub fn new(values: &[(&str, i64)]) -> Config {
        Config {
            values: values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            num_warps: 4,
            num_stages: 3,
        }
    }

    /// With `num_warps` warps per program.
    pub fn num_warps(mut self, num_warps: u32) -> Config {
        self.num_warps = num_warps;
        self
    }

    /// The value of constexpr `name`. Panics when the config has none: the configs and
    /// the launch closure are written together.
    pub fn get(&self, name: &str) -> i64 {
        match self.values.iter().find(|(n, _)| n == name) {
            Some((_, v)) => *v,
            None => panic!("autotune config {self} has no value named `{name}`"),
        }
    }

    /// With `num_stages` software-pipelining stages.
    pub fn num_stages(mut self, num_stages: u32) -> Config {
        self.num_stages = num_stages;
        self
    }

    /// The value of constexpr `name`, if the config has one.
    pub fn value(&self, name: &str) -> Option<i64> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Launch options with this config's warps and stages.
    pub fn launch_options(&self) -> crate::LaunchOptions {
        crate::LaunchOptions {
            num_warps: self.num_warps,
            num_stages: self.num_stages,
            ..Default::default()
        }
    }
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, v) in &self.values {
            write!(f, "{n}={v}, ")?;
        }
        write!(
            f,
            "num_warps={}, num_stages={}",
            self.num_warps, self.num_stages
        )
    }
}

/// A pruning rule (Triton's `prune_configs_by`): keeps the configs worth timing for a key.
pub type Prune = Box<dyn Fn(&[Config], &[i64]) -> Vec<Config> + Send + Sync>;

/// The configs of one kernel and the choices made so far (see the module docs).
pub struct Autotuner {
    name: String,
    configs: Vec<Config>,
    bench: BenchOptions,
    cache_dir: Option<PathBuf>,
    prune: Option<Prune>,
    chosen: Mutex<HashMap<String, Config>>,
}

impl Autotuner {
    /// A tuner named `name` (the cache key's first part) over `configs`.
    pub fn new(name: &str, configs: Vec<Config>) -> Autotuner {
        Autotuner {
            name: name.to_string(),
            configs,
            bench: BenchOptions {
                warmup: std::time::Duration::from_millis(5),
                rep: std::time::Duration::from_millis(20),
                ..Default::default()
            },
            cache_dir: None,
            prune: None,
            chosen: Mutex::new(HashMap::new()),
        }
    }

    /// The candidate configs, in order.
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }

    /// How each config is timed (default: 5 ms warm-up, 20 ms of runs).
    pub fn bench_options(mut self, bench: BenchOptions) -> Autotuner {
        self.bench = bench;
        self
    }

    /// Where choices are kept on disk (default: `TRITIUM_CACHE_DIR`, else
    /// `~/.cache/tritium`).
    pub fn cache_dir(mut self, dir: PathBuf) -> Autotuner {
        self.cache_dir = Some(dir);
        self
    }

    /// Times only the configs `prune` keeps for a key.
    pub fn prune_configs_by(mut self, prune: Prune) -> Autotuner {
        self.prune = Some(prune);
        self
    }

    /// The config chosen for `key` on `device` so far, if any.
    pub fn chosen(&self, device: &Device, key: &[i64]) -> Option<Config> {
        let id = self.id(device, key);
        lock(&self.chosen).get(&id).cloned()
    }

    /// Forgets the choice for `key` on `device`, in memory and on disk: the next launch
    /// times every config again (after a driver or hardware change, or in tests).
    pub fn forget(&self, device: &Device, key: &[i64]) {
        let id = self.id(device, key);
        lock(&self.chosen).remove(&id);
        if let Some(path) = self.file(&id) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Launches with the best config for `key` on `device`, choosing it first when this
    /// key is new: from the disk cache when it holds a choice among these configs, else by
    /// timing every (unpruned) config with `do_bench`. Configs whose launch fails are
    /// skipped while tuning (as Triton skips configs out of resources); when all fail, the
    /// first error is returned.
    pub fn run(
        &self,
        device: &Device,
        key: &[i64],
        mut launch: impl FnMut(&Config) -> Result<()>,
    ) -> Result<()> {
        let config = self.choose(device, key, &mut launch)?;
        launch(&config)
    }

    /// The best config for `key` on `device`: the one chosen before (in memory, else on
    /// disk), else the fastest `timed_launch` finds (see [`Autotuner::run`]).
    pub fn choose(
        &self,
        device: &Device,
        key: &[i64],
        mut timed_launch: impl FnMut(&Config) -> Result<()>,
    ) -> Result<Config> {
        if let Some(c) = self.chosen(device, key) {
            return Ok(c);
        }
        let id = self.id(device, key);
        let c = match self.read_choice(&id) {
            Some(c) => c,
            None => self.tune(device, key, &id, &mut timed_launch)?,
        };
        lock(&self.chosen).insert(id, c.clone());
        Ok(c)
    }

    fn tune(
        &self,
        device: &Device,
        key: &[i64],
        id: &str,
        launch: &mut impl FnMut(&Config) -> Result<()>,
    ) -> Result<Config> {
        let mut candidates = match &self.prune {
            Some(p) => p(&self.configs, key),
            None => self.configs.clone(),
        };
        if !matches!(device, Device::Cuda(_) | Device::CudaEmulator) {
            // Warps and stages mean nothing here: configs that differ only there are one.
            let mut seen = Vec::new();
            candidates.retain(|c| {
                let new = !seen.contains(&c.values);
                seen.push(c.values.clone());
                new
            });
        }
        if let [only] = candidates.as_slice() {
            // Nothing to compare: no timing, and nothing worth keeping on disk.
            return Ok(only.clone());
        }
        if *device == Device::Cpu {
            // Every candidate compiled first, side by side on the machine's cores: timed
            // one after another, each compiled at its first launch.
            let (_, kernels) = tritium_backend::cpu::defer_compiles(|| {
                for c in &candidates {
                    let _ = launch(c);
                }
            });
            tritium_backend::cpu::compile_deferred(kernels);
        }
        let mut timed = Vec::new();
        let mut first_error = None;
        for c in candidates {
            match do_bench(device, || launch(&c), &self.bench) {
                Ok(r) => timed.push((c, r)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let Some(best) = fastest(&timed).cloned() else {
            return Err(first_error.unwrap_or_else(|| Error::Launch {
                kernel: self.name.clone(),
                message: "autotune: no config to time (all pruned)".into(),
            }));
        };
        if std::env::var_os("TRITIUM_PRINT_AUTOTUNING").is_some_and(|v| v != "0" && !v.is_empty()) {
            eprintln!(
                "autotune {} key={key:?} on {device:?}: chose {best}",
                self.name
            );
            for (c, r) in &timed {
                eprintln!("  {c}: {:.3} ms (median)", r.median.as_secs_f64() * 1e3);
            }
        }
        self.write_choice(id, &best);
        Ok(best)
    }

    /// A hex digest of everything a choice depends on.
    fn id(&self, device: &Device, key: &[i64]) -> String {
        let mut h = Sha256::new();
        h.update(self.name.as_bytes());
        for c in &self.configs {
            h.update(c.to_string().as_bytes());
            h.update(b"\n");
        }
        h.update(format!("{key:?}|{device:?}").as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn file(&self, id: &str) -> Option<PathBuf> {
        let root = self
            .cache_dir
            .clone()
            .or_else(tritium_backend::pipeline::cache::default_root)?;
        Some(root.join("autotune").join(format!("{id}.txt")))
    }

    /// A cached choice: the index of one of these configs and its text, which must match
    /// (anything else is ignored and the key is tuned again).
    fn read_choice(&self, id: &str) -> Option<Config> {
        let path = self.file(id)?;
        if !std::fs::metadata(&path).ok()?.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        let (index, described) = text.trim_end().split_once(' ')?;
        let c = self.configs.get(index.parse::<usize>().ok()?)?;
        (c.to_string() == described).then(|| c.clone())
    }

    /// Saves a choice (atomically; a failure only costs a later tuning).
    fn write_choice(&self, id: &str, best: &Config) {
        let Some(path) = self.file(id) else { return };
        let Some(index) = self.configs.iter().position(|c| c == best) else {
            return;
        };
        let Some(dir) = path.parent() else { return };
        let tmp = dir.join(format!(".{id}.{}.tmp", std::process::id()));
        let ok = std::fs::create_dir_all(dir).is_ok()
            && std::fs::write(&tmp, format!("{index} {best}\n")).is_ok();
        if !ok || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The config Triton's autotuner chooses among configs timed by their median run: the
/// fastest, the first of equals. (Its `do_bench` returns the median first. A mean moves with
/// one run slowed by other work on the machine: at 1000³ `matmul`'s configs that run in
/// 4.6–4.8 ms were timed at 6.9–7.0 ms means now and then, and a config 5–8% slower than
/// the best could win.)
fn fastest(timed: &[(Config, BenchResult)]) -> Option<&Config> {
    timed.iter().min_by_key(|(_, r)| r.median).map(|(c, _)| c)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::{fastest, Config};
    use crate::testing::BenchResult;
    use std::time::Duration;

    fn timed(median_ms: u64, mean_ms: u64) -> BenchResult {
        let (median, mean) = (
            Duration::from_millis(median_ms),
            Duration::from_millis(mean_ms),
        );
        BenchResult {
            mean,
            median,
            min: median,
            max: mean.max(median),
            quantiles: vec![],
            runs: 9,
        }
    }

    /// The lowest median wins, as in Triton, whatever the means say (one slow run moves a
    /// mean); the first of equal medians.
    #[test]
    fn the_fastest_config_has_the_lowest_median() {
        let cases: [(&[(u64, u64)], usize); 4] = [
            (&[(4, 9), (5, 5)], 0),
            (&[(5, 5), (4, 9)], 1),
            (&[(3, 3), (3, 2), (7, 1)], 0),
            (&[(2, 2)], 0),
        ];
        for (times, want) in cases {
            let configs: Vec<(Config, BenchResult)> = times
                .iter()
                .enumerate()
                .map(|(i, &(median, mean))| (Config::new(&[("X", i as i64)]), timed(median, mean)))
                .collect();
            let got = fastest(&configs).map(|c| c.get("X"));
            assert_eq!(got, Some(want as i64), "{times:?}");
        }
        assert!(fastest(&[]).is_none());
    }
}
