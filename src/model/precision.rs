//! Number formats the compute engines and memories speak, with their sizes.

use serde::Serialize;
use std::fmt;

pub const NPREC: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Tf32,
    Bf16,
    Fp16,
    Fp8,
    Fp6,
    Fp4,
    Int8,
    Int4,
}

impl Precision {
    pub const ALL: [Precision; NPREC] = [
        Precision::Fp64,
        Precision::Fp32,
        Precision::Tf32,
        Precision::Bf16,
        Precision::Fp16,
        Precision::Fp8,
        Precision::Fp6,
        Precision::Fp4,
        Precision::Int8,
        Precision::Int4,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
            Precision::Fp8 => "fp8",
            Precision::Fp6 => "fp6",
            Precision::Fp4 => "fp4",
            Precision::Int8 => "int8",
            Precision::Int4 => "int4",
        }
    }

    /// Bytes per element as stored.
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Fp64 => 8.0,
            Precision::Fp32 | Precision::Tf32 => 4.0,
            Precision::Bf16 | Precision::Fp16 => 2.0,
            Precision::Fp8 | Precision::Int8 => 1.0,
            Precision::Fp6 => 0.75,
            Precision::Fp4 | Precision::Int4 => 0.5,
        }
    }

    pub fn parse(s: &str) -> Option<Precision> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
    }

    pub fn names() -> impl Iterator<Item = &'static str> {
        Precision::ALL.into_iter().map(|p| p.name())
    }

    /// Formats a device without a peak for `self` falls back to, best first (an int8 engine runs
    /// int4 work at the int8 rate; a device without fp8 runs fp8 work in bf16).
    pub fn fallbacks(self) -> &'static [Precision] {
        use Precision::*;
        match self {
            Fp4 => &[Fp4, Fp6, Fp8, Bf16, Fp16],
            Fp6 => &[Fp6, Fp8, Bf16, Fp16],
            Fp8 => &[Fp8, Bf16, Fp16],
            Int4 => &[Int4, Int8, Fp8, Bf16, Fp16],
            Int8 => &[Int8, Fp8, Bf16, Fp16],
            Bf16 => &[Bf16, Fp16, Fp32],
            Fp16 => &[Fp16, Bf16, Fp32],
            Tf32 => &[Tf32, Fp32],
            Fp32 => &[Fp32, Tf32],
            Fp64 => &[Fp64],
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
