//! Canonical resources: the one spelling a request's resource must have
//! before any grant is matched against it (decisions.md, "Canonical
//! resources").
//!
//! A glob matches strings, but whoever serves the resource (a filesystem, an
//! HTTP server) interprets them: `/p/../x`, `/p//x`, `/p/./x`, `/p/%2e%2e/x`
//! and a decomposed (NFD) `é` are all other spellings of names outside a
//! grant on `/p/**`. Rather than guess each server's interpretation, every
//! spelling that a server might read differently from its bytes is refused.

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use crate::capability::{CapabilityRequest, MAX_NAME_BYTES};
use crate::denial::{DenialReason, DenialType};

/// Longest resource accepted (Linux's `PATH_MAX`).
pub const MAX_RESOURCE_BYTES: usize = 4096;

/// Why a resource is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("is empty")]
    /// Empty.
    Empty,
    #[error("is longer than {MAX_RESOURCE_BYTES} bytes")]
    /// Longer than allowed.
    TooLong,
    #[error("has a control character or NUL")]
    /// Contains a control character.
    Control,
    #[error("has a backslash")]
    /// Contains a backslash.
    Backslash,
    #[error("has percent-encoding")]
    /// Contains percent-encoding.
    PercentEncoded,
    #[error("has a `.` or `..` segment")]
    /// Contains a `.` or `..` segment.
    DotSegment,
    #[error("has an empty segment (`//`)")]
    /// Contains an empty segment (`//`).
    EmptySegment,
    #[error("is not in Unicode normalization form C")]
    /// Not in Unicode NFC.
    NotNfc,
}

/// Checks that `resource` is in canonical form: NFC, no control characters,
/// backslashes or percent-encoding, and no `.`, `..` or empty segments
/// between slashes (a leading `/`, and the `//` right after a URL scheme,
/// are not segments).
pub fn check(resource: &str) -> Result<(), ResourceError> {
    if resource.is_empty() {
        return Err(ResourceError::Empty);
    }
    if resource.len() > MAX_RESOURCE_BYTES {
        return Err(ResourceError::TooLong);
    }
    if resource.chars().any(char::is_control) {
        return Err(ResourceError::Control);
    }
    if resource.contains('\\') {
        return Err(ResourceError::Backslash);
    }
    if resource.contains('%') {
        return Err(ResourceError::PercentEncoded);
    }
    let path = after_scheme(resource).unwrap_or(resource);
    let path = path.strip_prefix('/').unwrap_or(path);
    for segment in path.split('/') {
        match segment {
            "." | ".." => return Err(ResourceError::DotSegment),
            "" if !path.is_empty() => return Err(ResourceError::EmptySegment),
            _ => {}
        }
    }
    let nfc = match is_nfc_quick(resource.chars()) {
        IsNormalized::Yes => true,
        IsNormalized::No => false,
        IsNormalized::Maybe => resource.nfc().eq(resource.chars()),
    };
    if !nfc {
        return Err(ResourceError::NotNfc);
    }
    Ok(())
}

/// The part after `scheme://`, when `text` starts with a URL scheme.
fn after_scheme(text: &str) -> Option<&str> {
    let (scheme, rest) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    well_formed.then_some(rest)
}

impl CapabilityRequest {
    /// Refuses a request whose resource is not canonical ([`check`]) or
    /// whose names are longer than any capability may name: an
    /// `invalid_resource` denial, decided before any grant is consulted.
    pub fn check_canonical(&self) -> Result<(), DenialReason> {
        for (field, value) in [("namespace", &self.namespace), ("action", &self.action)] {
            if value.is_empty() || value.len() > MAX_NAME_BYTES {
                return Err(DenialReason::new(
                    DenialType::InvalidResource,
                    format!("the requested {field} must be 1..={MAX_NAME_BYTES} bytes"),
                ));
            }
        }
        check(&self.resource).map_err(|e| {
            DenialReason::new(
                DenialType::InvalidResource,
                format!("the requested resource {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_resources_pass() {
        for ok in [
            "/project/a.md",
            "/",
            "project",
            "offer:abc",
            "https://example.com/a/b",
            "/files/caf\u{e9}.txt",
            "/a/.hidden/..x/x..",
            "tool:*",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn other_spellings_are_refused() {
        let cases = [
            ("/project/%2e%2e/x", ResourceError::PercentEncoded),
            ("/project//x", ResourceError::EmptySegment),
            ("/project/x/", ResourceError::EmptySegment),
            ("//etc/passwd", ResourceError::EmptySegment),
            ("/project/./x", ResourceError::DotSegment),
            ("/project/../x", ResourceError::DotSegment),
            ("..", ResourceError::DotSegment),
            ("https://example.com/../x", ResourceError::DotSegment),
            ("/project\\..\\x", ResourceError::Backslash),
            ("/project/x\0", ResourceError::Control),
            ("/project/x\n", ResourceError::Control),
            ("/files/cafe\u{301}.txt", ResourceError::NotNfc),
            ("", ResourceError::Empty),
        ];
        for (resource, why) in cases {
            assert_eq!(check(resource), Err(why), "{resource:?}");
        }
        assert_eq!(
            check(&"a".repeat(MAX_RESOURCE_BYTES + 1)),
            Err(ResourceError::TooLong)
        );
    }

    #[test]
    fn long_names_are_invalid_resources() {
        let r = CapabilityRequest {
            namespace: "n".repeat(MAX_NAME_BYTES + 1),
            action: "read".into(),
            resource: "/x".into(),
        };
        assert_eq!(
            r.check_canonical().unwrap_err().kind,
            DenialType::InvalidResource
        );
    }
}
