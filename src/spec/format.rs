//! What every file format shares: its version number and a quantity as written (`"3.35 TB/s"`),
//! parsed when the file is lowered. A leaf, so that each file-shaped type and the error
//! descriptions use it without importing `spec/mod.rs`, which re-exports it.

use serde::Deserialize;
use std::fmt;

/// The current version of every file format.
pub const FORMAT_VERSION: u32 = 1;

/// A quantity as written (`"3.35 TB/s @source"`), parsed against its expected dimension when the
/// file is lowered, so every unit error of a file is reported together.
#[derive(Clone, Debug, PartialEq)]
pub struct Q(pub String);

impl<'de> Deserialize<'de> for Q {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Q;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity with its unit as a string, e.g. \"3.35 TB/s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Q, E> {
                Ok(Q(format!("{v}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
