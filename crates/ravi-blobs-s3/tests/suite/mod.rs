//! One module per scenario area.

mod s3;
