//! Randomness from the operating system, for keys and identifiers.

use delegateos::{AttestationId, ContractId};

/// The operating system could not provide randomness.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no randomness from the operating system: {0}")]
pub struct RandomError(String);

/// `N` random bytes.
pub fn bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut buf = [0u8; N];
    getrandom::getrandom(&mut buf).map_err(|e| RandomError(e.to_string()))?;
    Ok(buf)
}

/// A fresh contract ID.
pub fn contract_id() -> Result<ContractId, RandomError> {
    Ok(ContractId::from_bytes(bytes()?))
}

/// A fresh attestation ID.
pub fn attestation_id() -> Result<AttestationId, RandomError> {
    Ok(AttestationId::from_bytes(bytes()?))
}

/// A fresh MCP session ID: 128 random bits in lowercase hex.
pub fn session_id() -> Result<String, RandomError> {
    Ok(bytes::<16>()?.iter().map(|b| format!("{b:02x}")).collect())
}
