//! Launch grids: programs along up to three axes.

use crate::{Error, Result};

/// A launch grid: the number of programs along up to three axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grid(pub [u64; 3]);

/// The most programs one launch may have (2^48: a 65535³ CUDA grid fits). A validated
/// grid's program count fits `u64` arithmetic with room to spare.
pub const MAX_PROGRAMS: u64 = 1 << 48;

impl Grid {
    /// Total number of programs (saturating; [`Grid::validate`] bounds it).
    pub fn programs(&self) -> u64 {
        self.0.iter().fold(1u64, |p, &n| p.saturating_mul(n))
    }

    /// Checks that every axis has at least one program and fits an i32 program id, and
    /// that the grid has at most [`MAX_PROGRAMS`] programs.
    pub fn validate(&self, kernel: &str) -> Result<()> {
        let err = |message: String| Error::Launch {
            kernel: kernel.to_string(),
            message,
        };
        for (axis, &n) in self.0.iter().enumerate() {
            if n == 0 || n > i32::MAX as u64 {
                return Err(err(format!(
                    "grid axis {axis} is {n}; each axis needs 1..=2^31-1 programs"
                )));
            }
        }
        let [x, y, z] = self.0;
        if (x as u128) * (y as u128) * (z as u128) > MAX_PROGRAMS as u128 {
            return Err(err(format!(
                "grid {x} × {y} × {z} has more than 2^48 programs (the most one launch may have)"
            )));
        }
        Ok(())
    }
}

macro_rules! grid_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Grid { fn from(n: $t) -> Grid { Grid([n as u64, 1, 1]) } }
        impl From<[$t; 1]> for Grid { fn from(g: [$t; 1]) -> Grid { Grid([g[0] as u64, 1, 1]) } }
        impl From<[$t; 2]> for Grid { fn from(g: [$t; 2]) -> Grid { Grid([g[0] as u64, g[1] as u64, 1]) } }
        impl From<[$t; 3]> for Grid { fn from(g: [$t; 3]) -> Grid { Grid([g[0] as u64, g[1] as u64, g[2] as u64]) } }
        impl From<($t, $t)> for Grid { fn from(g: ($t, $t)) -> Grid { Grid([g.0 as u64, g.1 as u64, 1]) } }
        impl From<($t, $t, $t)> for Grid { fn from(g: ($t, $t, $t)) -> Grid { Grid([g.0 as u64, g.1 as u64, g.2 as u64]) } }
    )*};
}
grid_from!(u32, u64, usize, i32);
