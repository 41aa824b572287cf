//! Float max/min as every target computes them: IEEE 754-2019 maximumNumber and
//! minimumNumber. A NaN operand is ignored (as C's `fmax`, LLVM's `maxnum`) and -0 < +0,
//! which `maxnum` and Rust's `f64::max` leave open. The generated code's copy is
//! `llvm::Emit::float_max_min`; the builtin library's is `AtomicFloat` in `builtins.cpp`.

/// maximumNumber/minimumNumber on a float type.
pub trait MaxNumber: Copy {
    /// The larger operand; NaN only when both are; +0 for `max(+0, -0)`.
    fn max_number(self, other: Self) -> Self;
    /// The smaller operand; NaN only when both are; -0 for `min(+0, -0)`.
    fn min_number(self, other: Self) -> Self;
}

macro_rules! max_number {
    ($($t:ty),*) => {$(
        impl MaxNumber for $t {
            fn max_number(self, other: Self) -> Self {
                // Equal operands have equal bits but for ±0: `and` keeps +0.
                if self == other {
                    <$t>::from_bits(self.to_bits() & other.to_bits())
                } else {
                    self.max(other)
                }
            }
            fn min_number(self, other: Self) -> Self {
                if self == other {
                    <$t>::from_bits(self.to_bits() | other.to_bits())
                } else {
                    self.min(other)
                }
            }
        }
    )*};
}
max_number!(f32, f64);

#[cfg(test)]
mod tests {
    use super::MaxNumber;

    #[test]
    fn zeros_are_ordered_and_nan_is_ignored() {
        let rows: [(f64, f64, f64, f64); 6] = [
            (0.0, -0.0, 0.0, -0.0),
            (-0.0, 0.0, 0.0, -0.0),
            (-0.0, -0.0, -0.0, -0.0),
            (f64::NAN, -0.0, -0.0, -0.0),
            (1.5, -2.0, 1.5, -2.0),
            (f64::INFINITY, f64::NAN, f64::INFINITY, f64::INFINITY),
        ];
        for (a, b, max, min) in rows {
            assert_eq!(a.max_number(b).to_bits(), max.to_bits(), "max({a}, {b})");
            assert_eq!(a.min_number(b).to_bits(), min.to_bits(), "min({a}, {b})");
            let (af, bf) = (a as f32, b as f32);
            assert_eq!(af.max_number(bf).to_bits(), (max as f32).to_bits());
            assert_eq!(af.min_number(bf).to_bits(), (min as f32).to_bits());
        }
        assert!(f64::NAN.max_number(f64::NAN).is_nan());
    }
}
