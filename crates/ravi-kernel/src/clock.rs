//! The store's clock and the one conversion of durations to milliseconds that every
//! `duration_ms` and every timestamp uses.

/// Milliseconds since the Unix epoch, the store's clock.
pub fn now_ms() -> i64 {
    // The system clock without a calendar: every journaled call reads it.
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => ms_i64(d),
        Err(before) => -ms_i64(before.duration()),
    }
}

/// `d` in whole milliseconds, saturating (what every `duration_ms` field holds).
pub fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` in whole milliseconds as the store's clock counts them, saturating.
pub fn ms_i64(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
