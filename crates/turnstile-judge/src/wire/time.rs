//! Time as it travels: one conversion of Unix milliseconds to a UTC date,
//! for every side that shows one.

/// Unix milliseconds as an ISO 8601 UTC time to the millisecond
/// (`2026-12-05T14:30:00.000Z`): an interrupt's `expiresAt` on AG-UI, and
/// the expiry `turnstile chat` prints.
pub fn iso_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix milliseconds are ISO 8601 in UTC, checked against Python's
    /// datetime on the epoch, a leap day, the last millisecond of a century
    /// and a time before the epoch.
    #[test]
    fn expiry_is_iso_8601_utc() {
        for (ms, iso) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_764_979_200_123, "2025-12-06T00:00:00.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(iso_utc(ms), iso, "{ms}");
        }
    }
}
