//! Publisher keys: ed25519, base64 (standard, padded). A publisher signs the exact bytes of
//! the descriptor it publishes; the registry stores them with the signature, and the gateway
//! verifies both against the publisher's key before it installs anything.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

/// Why a key or a signature was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("a secret key is 32 bytes in base64")]
    Secret,
    #[error("a public key is 32 bytes in base64")]
    PublicLength,
    #[error("not an ed25519 public key: {0}")]
    NotOnCurve(ed25519_dalek::SignatureError),
    #[error("a signature is 64 bytes in base64")]
    SignatureLength,
    #[error("the signature does not match the descriptor and the publisher's key")]
    Mismatch,
}

/// A new key pair: (secret, public), base64.
pub fn generate() -> (String, String) {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the system's random source");
    let key = SigningKey::from_bytes(&secret);
    (
        STANDARD.encode(secret),
        STANDARD.encode(key.verifying_key().to_bytes()),
    )
}

/// The signature of `message` by the base64 `secret`.
///
/// # Errors
/// The secret is not 32 base64-encoded bytes.
pub fn sign(secret: &str, message: &[u8]) -> Result<String, KeyError> {
    Ok(STANDARD.encode(signing_key(secret)?.sign(message).to_bytes()))
}

fn signing_key(secret: &str) -> Result<SigningKey, KeyError> {
    let bytes: [u8; 32] = STANDARD
        .decode(secret.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(KeyError::Secret)?;
    Ok(SigningKey::from_bytes(&bytes))
}

/// The public key (base64) of the base64 `secret`.
///
/// # Errors
/// The secret is not 32 base64-encoded bytes.
pub fn public_of(secret: &str) -> Result<String, KeyError> {
    Ok(STANDARD.encode(signing_key(secret)?.verifying_key().to_bytes()))
}

/// A public key from base64.
///
/// # Errors
/// Not 32 bytes of base64, or not a point of the curve.
pub fn public(key: &str) -> Result<VerifyingKey, KeyError> {
    let bytes: [u8; 32] = STANDARD
        .decode(key.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(KeyError::PublicLength)?;
    VerifyingKey::from_bytes(&bytes).map_err(KeyError::NotOnCurve)
}

/// Whether `signature` (base64) is `key`'s signature of `message`.
///
/// # Errors
/// Why not: a malformed key or signature, or one that does not match.
pub fn verify(key: &str, message: &[u8], signature: &str) -> Result<(), KeyError> {
    let key = public(key)?;
    let bytes: [u8; 64] = STANDARD
        .decode(signature.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(KeyError::SignatureLength)?;
    key.verify_strict(message, &Signature::from_bytes(&bytes))
        .map_err(|_| KeyError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_its_message_and_key() {
        let (secret, key) = generate();
        let signature = sign(&secret, b"{\"appId\": \"com.example.a\"}").expect("sign");
        verify(&key, b"{\"appId\": \"com.example.a\"}", &signature).expect("valid");
        assert!(verify(&key, b"{\"appId\": \"com.example.b\"}", &signature).is_err());
        let (_, other) = generate();
        assert!(verify(&other, b"{\"appId\": \"com.example.a\"}", &signature).is_err());
        assert!(verify(&key, b"x", "bm90IGEgc2lnbmF0dXJl").is_err());
        assert!(verify("short", b"x", &signature).is_err());
    }
}
