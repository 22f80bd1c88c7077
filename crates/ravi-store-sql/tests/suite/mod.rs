//! One module per scenario area.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod audit;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod store;
