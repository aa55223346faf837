//! One module per page.

pub mod audit;
pub mod budgets;
pub mod decisions;
pub mod delegations;
pub mod signin;
pub mod upstreams;

/// Microcents as dollars and cents for people (`$1.2345`).
pub fn money(microcents: u64) -> String {
    let cents = microcents / 1_000_000;
    let rest = microcents % 1_000_000;
    let dollars = cents / 100;
    let c = cents % 100;
    if rest == 0 {
        format!("${dollars}.{c:02}")
    } else {
        format!("${dollars}.{c:02}{:06}", rest)
            .trim_end_matches('0')
            .to_owned()
    }
}

/// Unix milliseconds as an RFC 3339 UTC time.
pub fn when(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn money_reads_as_dollars() {
        assert_eq!(super::money(0), "$0.00");
        assert_eq!(super::money(150_000_000), "$1.50");
        assert_eq!(super::money(1_500_000), "$0.015");
    }
}
