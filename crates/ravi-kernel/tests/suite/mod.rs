//! One module per scenario area.

mod golden;
