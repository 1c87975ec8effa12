#![doc = include_str!("../README.md")]

use core::fmt;

/// Everything that can go wrong in this crate. It has no variants until the crate has
/// operations that can fail; every variant added names what was wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {}

impl fmt::Display for Error {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Error {}
