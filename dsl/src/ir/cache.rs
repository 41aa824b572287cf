//! Cache hints of loads and stores: Triton's `cache_modifier`, `eviction_policy` and
//! `volatile`. They never change what a program computes; the targets honour what they
//! have an equivalent for (PTX cache operators and eviction priorities on CUDA, volatile
//! accesses everywhere).

/// Triton's `cache_modifier`: PTX's cache operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheModifier {
    /// None given.
    #[default]
    Default,
    /// `.ca`: cache at every level (loads).
    Ca,
    /// `.cg`: cache in L2, not L1 (loads and stores).
    Cg,
    /// `.cs`: streaming, likely accessed once (stores).
    Cs,
    /// `.cv`: do not cache, fetch again (loads).
    Cv,
    /// `.wb`: write back (stores).
    Wb,
    /// `.wt`: write through (stores).
    Wt,
}

/// Triton's `eviction_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Eviction {
    /// None given (`"evict_normal"` too).
    #[default]
    Normal,
    /// `"evict_first"`: evicted before other data.
    First,
    /// `"evict_last"`: kept longer than other data.
    Last,
}

/// The cache hints of one load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CacheHints {
    /// The cache operator.
    pub modifier: CacheModifier,
    /// The eviction priority.
    pub eviction: Eviction,
    /// Every access happens as written (loads only, as in Triton).
    pub volatile: bool,
}

impl CacheModifier {
    /// The modifiers a load takes (Triton's list).
    pub const LOAD: [CacheModifier; 3] = [CacheModifier::Ca, CacheModifier::Cg, CacheModifier::Cv];
    /// The modifiers a store takes (Triton's list).
    pub const STORE: [CacheModifier; 4] = [
        CacheModifier::Wb,
        CacheModifier::Cg,
        CacheModifier::Cs,
        CacheModifier::Wt,
    ];

    /// Triton's (and PTX's) spelling, `""` for none.
    pub fn name(self) -> &'static str {
        match self {
            CacheModifier::Default => "",
            CacheModifier::Ca => ".ca",
            CacheModifier::Cg => ".cg",
            CacheModifier::Cs => ".cs",
            CacheModifier::Cv => ".cv",
            CacheModifier::Wb => ".wb",
            CacheModifier::Wt => ".wt",
        }
    }

    /// The modifier spelled `name`.
    pub fn from_name(name: &str) -> Option<CacheModifier> {
        [
            CacheModifier::Default,
            CacheModifier::Ca,
            CacheModifier::Cg,
            CacheModifier::Cs,
            CacheModifier::Cv,
            CacheModifier::Wb,
            CacheModifier::Wt,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

impl Eviction {
    /// Triton's spelling, `""` for none.
    pub fn name(self) -> &'static str {
        match self {
            Eviction::Normal => "",
            Eviction::First => "evict_first",
            Eviction::Last => "evict_last",
        }
    }

    /// The policy spelled `name` (`"evict_normal"` is the default).
    pub fn from_name(name: &str) -> Option<Eviction> {
        match name {
            "" | "evict_normal" => Some(Eviction::Normal),
            "evict_first" => Some(Eviction::First),
            "evict_last" => Some(Eviction::Last),
            _ => None,
        }
    }
}

impl CacheHints {
    /// No hint.
    pub fn is_default(&self) -> bool {
        *self == CacheHints::default()
    }

    /// Data touched once: streamed past the caches where the target can (`.cs`, `.cv`,
    /// `.cg` on the CPU, or `evict_first`).
    pub fn streaming(&self) -> bool {
        matches!(
            self.modifier,
            CacheModifier::Cs | CacheModifier::Cg | CacheModifier::Cv
        ) || self.eviction == Eviction::First
    }
}
