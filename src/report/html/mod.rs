//! Reports to share: one self-contained HTML file per comparison or validation run (inline
//! style, pictures as inline SVG, no URL fetched), built as a string here and written by the
//! CLI (`compare --report`, `validate --report`), since the library does no I/O.

pub mod compare;
pub mod page;
pub mod validate;
