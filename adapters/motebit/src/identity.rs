//! Whether a `motebit_id` commits to a key by itself (the `sovereign` rung
//! of identity binding): a `did:key` that *is* the key, or the UUIDv8 a
//! sovereign motebit derives from `SHA-256(public key)`.

use ed25519_dalek::VerifyingKey;
use sha2::{Digest, Sha256};

/// The multicodec prefix of an Ed25519 public key in a `did:key`.
const ED25519_PUB: [u8; 2] = [0xed, 0x01];

/// The `motebit_id` a sovereign motebit with `key` has: the first 16 bytes
/// of `SHA-256(key)` as a UUID of version 8, variant `10b`.
pub fn sovereign_id(key: &VerifyingKey) -> String {
    sovereign_id_of_bytes(key.as_bytes())
}

/// The sovereign id derived from `key`'s bytes, whatever their number (the
/// reference derives from whatever `hexToBytes` gave it).
pub fn sovereign_id_of_bytes(key: &[u8]) -> String {
    let h = Sha256::digest(key);
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = 0x80 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    let x = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..]
    )
}

/// The `did:key` of `key`.
pub fn did_key(key: &VerifyingKey) -> String {
    let mut prefixed = ED25519_PUB.to_vec();
    prefixed.extend_from_slice(key.as_bytes());
    format!("did:key:z{}", bs58::encode(prefixed).into_string())
}

/// Whether `motebit_id` commits to `key`: a `did:key` of exactly this key,
/// or its sovereign UUID (compared without regard to case).
pub fn is_sovereign(motebit_id: &str, key: &VerifyingKey) -> bool {
    is_sovereign_bytes(motebit_id, key.as_bytes())
}

/// [`is_sovereign`] over the key's 32 bytes, whether or not they are a
/// valid point (the reference derives from the bytes alone).
pub fn is_sovereign_bytes(motebit_id: &str, key: &[u8; 32]) -> bool {
    if motebit_id.starts_with("did:key:") {
        return did_key_bytes(motebit_id).is_some_and(|k| k == *key);
    }
    motebit_id.eq_ignore_ascii_case(&sovereign_id_of_bytes(key))
}

/// The key a `did:key:z…` names: base58btc of the Ed25519 multicodec
/// prefix and 32 bytes (`None` for anything else).
pub fn did_key_bytes(did: &str) -> Option<[u8; 32]> {
    let bytes = bs58::decode(did.strip_prefix("did:key:z")?)
        .into_vec()
        .ok()?;
    if bytes.len() != 34 || bytes[..2] != ED25519_PUB {
        return None;
    }
    bytes[2..].try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hex_key: &str) -> VerifyingKey {
        crate::encoding::parse_key(hex_key).unwrap()
    }

    /// Both forms from the conformance corpus.
    #[test]
    fn corpus_identities_are_sovereign() {
        let k = key("8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c");
        assert_eq!(sovereign_id(&k), "34750f98-bd59-8cfc-946d-a45aaabe933b");
        assert!(is_sovereign("34750F98-BD59-8CFC-946D-A45AAABE933B", &k));
        assert_eq!(
            did_key(&k),
            "did:key:z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX"
        );
        assert!(is_sovereign(&did_key(&k), &k));
        assert!(!is_sovereign("mote-not-sovereign", &k));
        let other = key("8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394");
        assert!(!is_sovereign(&did_key(&other), &k));
        assert!(!is_sovereign("did:key:6Mkon3", &k));
        assert!(!is_sovereign("did:key:z0OIl", &k));
    }
}
