//! Operator attributes: the values kernels read with `extra->Attr<T>(name)`.

use std::collections::BTreeMap;
use std::fmt;

use super::error::{AotError, AotResult};

/// One attribute value; the variants are the types `AotExtra::Attr<T>` can return.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// `Attr<bool>`.
    Bool(bool),
    /// `Attr<int64_t>`.
    Int(i64),
    /// `Attr<float>`.
    Float(f32),
    /// `Attr<std::string>`.
    Str(String),
    /// `Attr<std::vector<int64_t>>`.
    IntVec(Vec<i64>),
    /// `Attr<std::vector<float>>`.
    FloatVec(Vec<f32>),
    /// `Attr<std::vector<std::vector<int64_t>>>`.
    Int2D(Vec<Vec<i64>>),
    /// `Attr<std::vector<std::vector<float>>>`.
    Float2D(Vec<Vec<f32>>),
}

/// The kinds of [`AttrValue`], numbered as the C++ shim numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum AttrKind {
    /// `bool`.
    Bool = 0,
    /// `int64_t`.
    Int = 1,
    /// `float`.
    Float = 2,
    /// `std::string`.
    Str = 3,
    /// `std::vector<int64_t>`.
    IntVec = 4,
    /// `std::vector<float>`.
    FloatVec = 5,
    /// `std::vector<std::vector<int64_t>>`.
    Int2D = 6,
    /// `std::vector<std::vector<float>>`.
    Float2D = 7,
}

impl AttrKind {
    /// The kind with this number.
    pub fn from_i32(v: i32) -> Option<AttrKind> {
        Some(match v {
            0 => AttrKind::Bool,
            1 => AttrKind::Int,
            2 => AttrKind::Float,
            3 => AttrKind::Str,
            4 => AttrKind::IntVec,
            5 => AttrKind::FloatVec,
            6 => AttrKind::Int2D,
            7 => AttrKind::Float2D,
            _ => return None,
        })
    }

    /// The C++ type name.
    pub fn cpp_name(self) -> &'static str {
        match self {
            AttrKind::Bool => "bool",
            AttrKind::Int => "int64_t",
            AttrKind::Float => "float",
            AttrKind::Str => "std::string",
            AttrKind::IntVec => "std::vector<int64_t>",
            AttrKind::FloatVec => "std::vector<float>",
            AttrKind::Int2D => "std::vector<std::vector<int64_t>>",
            AttrKind::Float2D => "std::vector<std::vector<float>>",
        }
    }
}

impl AttrValue {
    /// The kind of this value.
    pub fn kind(&self) -> AttrKind {
        match self {
            AttrValue::Bool(_) => AttrKind::Bool,
            AttrValue::Int(_) => AttrKind::Int,
            AttrValue::Float(_) => AttrKind::Float,
            AttrValue::Str(_) => AttrKind::Str,
            AttrValue::IntVec(_) => AttrKind::IntVec,
            AttrValue::FloatVec(_) => AttrKind::FloatVec,
            AttrValue::Int2D(_) => AttrKind::Int2D,
            AttrValue::Float2D(_) => AttrKind::Float2D,
        }
    }

    /// The value converted to `kind`, as MindSpore's `GetValue` allows: exact kinds, and an
    /// integer (or integer vector) read as float. `None` when no such conversion exists.
    pub fn convert(&self, kind: AttrKind) -> Option<AttrValue> {
        if self.kind() == kind {
            return Some(self.clone());
        }
        Some(match (self, kind) {
            (AttrValue::Int(i), AttrKind::Float) => AttrValue::Float(*i as f32),
            (AttrValue::IntVec(v), AttrKind::FloatVec) => {
                AttrValue::FloatVec(v.iter().map(|&x| x as f32).collect())
            }
            (AttrValue::Int2D(v), AttrKind::Float2D) => AttrValue::Float2D(
                v.iter()
                    .map(|r| r.iter().map(|&x| x as f32).collect())
                    .collect(),
            ),
            // An empty vector literal has no element type: read it as whatever is asked.
            (AttrValue::IntVec(v), AttrKind::Int2D) if v.is_empty() => AttrValue::Int2D(vec![]),
            (AttrValue::IntVec(v), AttrKind::Float2D) if v.is_empty() => AttrValue::Float2D(vec![]),
            _ => return None,
        })
    }
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Bool(v) => write!(f, "{v}"),
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => write!(f, "{v}"),
            AttrValue::Str(v) => write!(f, "{v:?}"),
            AttrValue::IntVec(v) => write!(f, "{v:?}"),
            AttrValue::FloatVec(v) => write!(f, "{v:?}"),
            AttrValue::Int2D(v) => write!(f, "{v:?}"),
            AttrValue::Float2D(v) => write!(f, "{v:?}"),
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident as $c:ty),* $(,)?) => {$(
        impl From<$t> for AttrValue {
            fn from(x: $t) -> Self { AttrValue::$v(x as $c) }
        }
        impl From<Vec<$t>> for AttrValue {
            fn from(x: Vec<$t>) -> Self { AttrValue::from(x.as_slice()) }
        }
        impl From<&[$t]> for AttrValue {
            fn from(x: &[$t]) -> Self { from_scalar!(@vec $v, x, $c) }
        }
        impl<const N: usize> From<[$t; N]> for AttrValue {
            fn from(x: [$t; N]) -> Self { AttrValue::from(&x[..]) }
        }
        impl From<Vec<Vec<$t>>> for AttrValue {
            fn from(x: Vec<Vec<$t>>) -> Self { from_scalar!(@vec2 $v, x, $c) }
        }
    )*};
    (@vec Int, $x:ident, $c:ty) => { AttrValue::IntVec($x.iter().map(|&v| v as i64).collect()) };
    (@vec Float, $x:ident, $c:ty) => { AttrValue::FloatVec($x.iter().map(|&v| v as f32).collect()) };
    (@vec2 Int, $x:ident, $c:ty) => {
        AttrValue::Int2D($x.iter().map(|r| r.iter().map(|&v| v as i64).collect()).collect())
    };
    (@vec2 Float, $x:ident, $c:ty) => {
        AttrValue::Float2D($x.iter().map(|r| r.iter().map(|&v| v as f32).collect()).collect())
    };
}
from_scalar!(i32 => Int as i64, i64 => Int as i64, u32 => Int as i64, usize => Int as i64,
             f32 => Float as f32, f64 => Float as f32);

impl From<bool> for AttrValue {
    fn from(x: bool) -> Self {
        AttrValue::Bool(x)
    }
}

impl From<&str> for AttrValue {
    fn from(x: &str) -> Self {
        AttrValue::Str(x.to_string())
    }
}

impl From<String> for AttrValue {
    fn from(x: String) -> Self {
        AttrValue::Str(x)
    }
}

/// A set of named attributes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs {
    map: BTreeMap<String, AttrValue>,
}

impl Attrs {
    /// No attributes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an attribute (builder style).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.set(name, value);
        self
    }

    /// Adds or replaces an attribute.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<AttrValue>) {
        self.map.insert(name.into(), value.into());
    }

    /// The attribute `name`, if set.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.map.get(name)
    }

    /// The attribute `name` converted to `kind`, or an error naming the attribute.
    pub fn get_as(&self, name: &str, kind: AttrKind) -> AotResult<AttrValue> {
        let v = self.map.get(name).ok_or_else(|| AotError::Attr {
            name: name.to_string(),
            message: format!(
                "not set (the operator has: {})",
                if self.map.is_empty() {
                    "no attributes".to_string()
                } else {
                    self.map.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            ),
        })?;
        v.convert(kind).ok_or_else(|| AotError::Attr {
            name: name.to_string(),
            message: format!(
                "is {} = {v}, but the kernel reads it as {}",
                v.kind().cpp_name(),
                kind.cpp_name()
            ),
        })
    }

    /// True when `name` is set.
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The attributes in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// `self` with every attribute of `other` added or replaced.
    pub fn merged(&self, other: &Attrs) -> Attrs {
        let mut out = self.clone();
        for (k, v) in &other.map {
            out.map.insert(k.clone(), v.clone());
        }
        out
    }

    /// A stable text form, used in instance keys.
    pub(crate) fn fingerprint(&self) -> String {
        self.map
            .iter()
            .map(|(k, v)| format!("{k}:{:?}={v};", v.kind()))
            .collect()
    }

    /// Serializes into bytes (used by packages): per attribute a key/value entry whose value is
    /// a kind byte followed by little-endian payload.
    pub(crate) fn encode(&self) -> Vec<(String, Vec<u8>)> {
        self.map
            .iter()
            .map(|(k, v)| (k.clone(), encode_value(v)))
            .collect()
    }

    /// Inverse of [`Attrs::encode`].
    pub(crate) fn decode(entries: &[(String, Vec<u8>)]) -> AotResult<Attrs> {
        let mut attrs = Attrs::new();
        for (k, v) in entries {
            let value =
                decode_value(v).map_err(|e| AotError::Package(format!("attribute `{k}`: {e}")))?;
            attrs.map.insert(k.clone(), value);
        }
        Ok(attrs)
    }
}

impl<K: Into<String>, V: Into<AttrValue>> FromIterator<(K, V)> for Attrs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut a = Attrs::new();
        for (k, v) in iter {
            a.set(k, v);
        }
        a
    }
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u32).to_le_bytes());
}

fn encode_value(v: &AttrValue) -> Vec<u8> {
    let mut out = vec![v.kind() as u8];
    match v {
        AttrValue::Bool(b) => out.push(*b as u8),
        AttrValue::Int(i) => out.extend_from_slice(&i.to_le_bytes()),
        AttrValue::Float(f) => out.extend_from_slice(&f.to_le_bytes()),
        AttrValue::Str(s) => out.extend_from_slice(s.as_bytes()),
        AttrValue::IntVec(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        AttrValue::FloatVec(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        AttrValue::Int2D(rows) => {
            put_u32(&mut out, rows.len());
            for r in rows {
                put_u32(&mut out, r.len());
                r.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
            }
        }
        AttrValue::Float2D(rows) => {
            put_u32(&mut out, rows.len());
            for r in rows {
                put_u32(&mut out, r.len());
                r.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
            }
        }
    }
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err(format!("truncated: need {n} bytes, {} left", self.0.len()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()) as usize)
    }
    fn i64s(&mut self, n: usize) -> Result<Vec<i64>, String> {
        let b = self.take(n.checked_mul(8).ok_or("length overflow")?)?;
        Ok(b.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }
    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, String> {
        let b = self.take(n.checked_mul(4).ok_or("length overflow")?)?;
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }
}

fn decode_value(bytes: &[u8]) -> Result<AttrValue, String> {
    let (&tag, rest) = bytes.split_first().ok_or("empty value")?;
    let kind = AttrKind::from_i32(tag as i32).ok_or(format!("unknown kind {tag}"))?;
    let mut r = Reader(rest);
    let whole = |n: usize, size: usize| -> Result<usize, String> {
        let q = n / size;
        if q * size == n {
            Ok(q)
        } else {
            Err(format!("{n} payload bytes is not a multiple of {size}"))
        }
    };
    let v = match kind {
        AttrKind::Bool => AttrValue::Bool(r.take(1)?[0] != 0),
        AttrKind::Int => AttrValue::Int(r.i64s(1)?[0]),
        AttrKind::Float => AttrValue::Float(r.f32s(1)?[0]),
        AttrKind::Str => AttrValue::Str(
            String::from_utf8(r.take(rest.len())?.to_vec()).map_err(|e| e.to_string())?,
        ),
        AttrKind::IntVec => AttrValue::IntVec(r.i64s(whole(rest.len(), 8)?)?),
        AttrKind::FloatVec => AttrValue::FloatVec(r.f32s(whole(rest.len(), 4)?)?),
        AttrKind::Int2D => {
            let rows = r.u32()?;
            let mut out = Vec::new();
            for _ in 0..rows {
                let n = r.u32()?;
                out.push(r.i64s(n)?);
            }
            AttrValue::Int2D(out)
        }
        AttrKind::Float2D => {
            let rows = r.u32()?;
            let mut out = Vec::new();
            for _ in 0..rows {
                let n = r.u32()?;
                out.push(r.f32s(n)?);
            }
            AttrValue::Float2D(out)
        }
    };
    if !r.0.is_empty() {
        return Err(format!("{} trailing bytes", r.0.len()));
    }
    Ok(v)
}
