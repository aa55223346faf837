//! `[telemetry]`: OpenTelemetry traces over OTLP/HTTP, off unless
//! `otlp_endpoint` is set (docs/operations.md, "Traces").

use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};

/// Where and how traces are exported.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces URL spans are POSTed to (`…/v1/traces`).
    pub endpoint: String,
    /// `service.name` on every span.
    pub service_name: String,
    /// The share of new traces recorded (a caller's sampled flag decides
    /// for traces it started).
    pub sampling_ratio: f64,
    /// The longest one export may take.
    pub export_timeout: Duration,
    /// The most spans waiting for export; more are dropped, never waited for.
    pub max_queue: usize,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    /// The OTLP/HTTP endpoint (`http://collector:4318`, to which
    /// `/v1/traces` is added unless the path already ends with it); traces
    /// are off without it.
    #[serde(default)]
    otlp_endpoint: Option<String>,
    /// `service.name` (default `dgw`).
    #[serde(default)]
    service_name: Option<String>,
    /// 0.0–1.0 of the traces dgw starts (default 1.0).
    #[serde(default)]
    sampling_ratio: Option<f64>,
    /// The longest one export may take (default `10s`).
    #[serde(default)]
    export_timeout: Option<String>,
    /// The most spans queued for export (default 2048); more are dropped.
    #[serde(default)]
    max_queue: Option<usize>,
}

/// The most spans a queue may be set to hold.
const MAX_QUEUE: usize = 1 << 20;

impl RawTelemetry {
    pub(super) fn validate(
        self,
        check: &Check<'_>,
    ) -> Result<Option<TelemetryConfig>, ConfigError> {
        let Some(endpoint) = self.otlp_endpoint else {
            for (key, set) in [
                ("telemetry.service_name", self.service_name.is_some()),
                ("telemetry.sampling_ratio", self.sampling_ratio.is_some()),
                ("telemetry.export_timeout", self.export_timeout.is_some()),
                ("telemetry.max_queue", self.max_queue.is_some()),
            ] {
                if set {
                    return Err(
                        check.invalid(key, "has no effect without telemetry.otlp_endpoint".into())
                    );
                }
            }
            return Ok(None);
        };
        let endpoint = traces_url(&endpoint).ok_or_else(|| {
            check.invalid(
                "telemetry.otlp_endpoint",
                format!("{endpoint:?} is not an http:// or https:// URL without credentials"),
            )
        })?;
        let service_name = self.service_name.unwrap_or_else(|| "dgw".into());
        if service_name.is_empty()
            || service_name.len() > 128
            || service_name.chars().any(char::is_control)
        {
            return Err(check.invalid(
                "telemetry.service_name",
                "must be 1-128 printable characters".into(),
            ));
        }
        let sampling_ratio = self.sampling_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&sampling_ratio) {
            return Err(check.invalid(
                "telemetry.sampling_ratio",
                format!("{sampling_ratio} is not between 0.0 and 1.0"),
            ));
        }
        let export_timeout = check.duration(
            "telemetry.export_timeout",
            self.export_timeout.as_deref().unwrap_or("10s"),
        )?;
        let max_queue = self.max_queue.unwrap_or(2048);
        if !(1..=MAX_QUEUE).contains(&max_queue) {
            return Err(check.invalid("telemetry.max_queue", format!("must be 1-{MAX_QUEUE}")));
        }
        Ok(Some(TelemetryConfig {
            endpoint,
            service_name,
            sampling_ratio,
            export_timeout,
            max_queue,
        }))
    }
}

/// The traces URL of an OTLP/HTTP endpoint: `/v1/traces` added unless the
/// path ends with it. `None` for anything but http(s) with a host, or a
/// URL carrying user info (it would be exported in logs and errors).
fn traces_url(endpoint: &str) -> Option<String> {
    let uri: hyper::Uri = endpoint.parse().ok()?;
    if !matches!(uri.scheme_str(), Some("http" | "https"))
        || uri.host().is_none_or(str::is_empty)
        || uri.authority().is_some_and(|a| a.as_str().contains('@'))
        || uri.query().is_some()
    {
        return None;
    }
    let trimmed = endpoint.trim_end_matches('/');
    Some(
        if uri.path().trim_end_matches('/').ends_with("/v1/traces") {
            trimmed.to_owned()
        } else {
            format!("{trimmed}/v1/traces")
        },
    )
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn the_traces_url_is_the_endpoint_with_v1_traces() {
        for (given, url) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://c:4318/", "http://c:4318/v1/traces"),
            ("https://c/otlp/v1/traces", "https://c/otlp/v1/traces"),
        ] {
            assert_eq!(traces_url(given).as_deref(), Some(url), "{given}");
        }
        for bad in [
            "",
            "c:4318",
            "ftp://c/",
            "http://user:pw@c:4318",
            "http://c/?x=1",
        ] {
            assert_eq!(traces_url(bad), None, "{bad}");
        }
    }
}
