//! PKCE (RFC 7636) as OAuth 2.1 and the MCP authorization spec require it:
//! S256 only. A challenge is parsed once at `/oauth/authorize` (`plain`,
//! none, or one that is not 43 base64url characters is refused there), and
//! the verifier presented at the token endpoint must hash to it.

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why a PKCE parameter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkceError {
    #[error("code_challenge is required (PKCE with S256)")]
    Missing,
    #[error("code_challenge_method must be S256 (plain is not accepted)")]
    Method,
    #[error("code_challenge must be the 43-character base64url SHA-256 of the verifier")]
    Challenge,
    #[error("code_verifier must be 43-128 characters of A-Z a-z 0-9 - . _ ~")]
    Verifier,
    #[error("code_verifier does not match the code_challenge")]
    Mismatch,
}

/// An S256 code challenge: the base64url (no padding) SHA-256 of the
/// client's verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChallenge(String);

impl CodeChallenge {
    /// The challenge of an authorization request: `method` must be `S256`
    /// (RFC 7636's default, `plain`, is refused, as is leaving it out).
    pub fn parse(challenge: Option<&str>, method: Option<&str>) -> Result<Self, PkceError> {
        let challenge = challenge.ok_or(PkceError::Missing)?;
        if method != Some("S256") {
            return Err(PkceError::Method);
        }
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(challenge)
            .map_err(|_| PkceError::Challenge)?;
        if decoded.len() != 32 || challenge.len() != 43 {
            return Err(PkceError::Challenge);
        }
        Ok(Self(challenge.to_owned()))
    }

    /// A challenge as stored with a code (parsed when it was issued).
    pub fn stored(text: &str) -> Result<Self, PkceError> {
        Self::parse(Some(text), Some("S256"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `verifier` (RFC 7636 §4.1) hashes to this challenge,
    /// compared in constant time.
    pub fn verify(&self, verifier: Option<&str>) -> Result<(), PkceError> {
        let verifier = verifier.ok_or(PkceError::Verifier)?;
        let well_formed = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        if !well_formed {
            return Err(PkceError::Verifier);
        }
        let digest = Sha256::digest(verifier.as_bytes());
        let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        if bool::from(computed.as_bytes().ct_eq(self.0.as_bytes())) {
            Ok(())
        } else {
            Err(PkceError::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7636 Appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn the_rfc_example_verifies_and_anything_else_is_refused() {
        let c = CodeChallenge::parse(Some(CHALLENGE), Some("S256")).unwrap();
        c.verify(Some(VERIFIER)).unwrap();
        let other = format!("{}A", &VERIFIER[..VERIFIER.len() - 1]);
        assert_eq!(c.verify(Some(&other)), Err(PkceError::Mismatch));
        assert_eq!(c.verify(None), Err(PkceError::Verifier));
        assert_eq!(c.verify(Some("short")), Err(PkceError::Verifier));
        assert_eq!(
            c.verify(Some(&format!("{VERIFIER} "))),
            Err(PkceError::Verifier)
        );
        // The challenge itself is not a verifier of itself.
        assert_eq!(c.verify(Some(CHALLENGE)), Err(PkceError::Mismatch));
    }

    #[test]
    fn only_s256_challenges_are_taken() {
        assert_eq!(
            CodeChallenge::parse(Some(CHALLENGE), Some("plain")),
            Err(PkceError::Method)
        );
        assert_eq!(
            CodeChallenge::parse(Some(CHALLENGE), None),
            Err(PkceError::Method)
        );
        assert_eq!(
            CodeChallenge::parse(None, Some("S256")),
            Err(PkceError::Missing)
        );
        for bad in [
            VERIFIER.replace('d', "+"),
            "abc".into(),
            format!("{CHALLENGE}A"),
        ] {
            assert_eq!(
                CodeChallenge::parse(Some(&bad), Some("S256")),
                Err(PkceError::Challenge),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        /// A verifier verifies against its own challenge and no other's.
        #[test]
        fn a_verifier_matches_its_own_challenge_only(
            a in "[A-Za-z0-9._~-]{43,128}",
            b in "[A-Za-z0-9._~-]{43,128}",
        ) {
            let challenge = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(v.as_bytes()));
            let ca = CodeChallenge::parse(Some(&challenge(&a)), Some("S256")).unwrap();
            proptest::prop_assert!(ca.verify(Some(&a)).is_ok());
            proptest::prop_assert_eq!(ca.verify(Some(&b)).is_ok(), a == b);
        }
    }
}
