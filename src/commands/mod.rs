//! The commands: `serve` and its flags ([`cli`]), the offline `transcode` and `diag`
//! ([`tools`]), and `demo` (feature `demo`, on by default).

pub mod cli;
#[cfg(feature = "demo")]
pub mod demo;
pub mod tools;
