//! Teams' endpoint keys at rest: sealed with AES-256-GCM under the server's secrets key
//! (`--secrets-key` / `LACHESIS_SECRETS_KEY`, 32 bytes as 64 hex digits), so a database dump or
//! backup alone does not reveal them. A sealed value is a random 12-byte nonce followed by the
//! ciphertext and its tag; the card's slug is bound in as associated data, so a sealed key copied
//! onto another card does not open.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};

/// The longest key a team may supply (real API keys are well under 200 bytes).
pub const MAX_KEY_BYTES: usize = 4096;
const NONCE_BYTES: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the secrets key must be 64 hex digits (32 bytes)")]
    BadKey,
    #[error("an API key is 1 to {MAX_KEY_BYTES} bytes")]
    BadSecret,
    #[error("the sealed key does not open under this server's secrets key")]
    Open,
}

/// The server's secrets key. Its Debug form never shows the bytes.
#[derive(Clone)]
pub struct SecretsKey([u8; 32]);

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(..)")
    }
}

impl std::str::FromStr for SecretsKey {
    type Err = SealError;

    fn from_str(hex: &str) -> Result<Self, SealError> {
        let hex = hex.trim();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SealError::BadKey);
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte =
                u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| SealError::BadKey)?;
        }
        Ok(Self(key))
    }
}

impl SecretsKey {
    /// A fresh random key (tests, and `lachesis` printing one for an operator to keep).
    pub fn random() -> Self {
        Self(rand::random())
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new((&self.0).into())
    }

    /// Seals `secret` for the card `slug`.
    pub fn seal(&self, slug: &str, secret: &str) -> Result<Vec<u8>, SealError> {
        if secret.is_empty() || secret.len() > MAX_KEY_BYTES {
            return Err(SealError::BadSecret);
        }
        let nonce: [u8; NONCE_BYTES] = rand::random();
        let sealed = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.as_bytes(),
                    aad: slug.as_bytes(),
                },
            )
            .map_err(|_| SealError::BadSecret)?;
        Ok([nonce.as_slice(), &sealed].concat())
    }

    /// Opens what [`SecretsKey::seal`] sealed for the same card.
    pub fn open(&self, slug: &str, sealed: &[u8]) -> Result<String, SealError> {
        if sealed.len() <= NONCE_BYTES {
            return Err(SealError::Open);
        }
        let (nonce, body) = sealed.split_at(NONCE_BYTES);
        let plain = self
            .cipher()
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: slug.as_bytes(),
                },
            )
            .map_err(|_| SealError::Open)?;
        String::from_utf8(plain).map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_key_opens_only_for_its_card_under_its_key() {
        let key = SecretsKey::random();
        let sealed = key.seal("team-judge", "sk-live-123").unwrap();
        assert!(!sealed.windows(11).any(|w| w == b"sk-live-123"));
        assert_eq!(key.open("team-judge", &sealed).unwrap(), "sk-live-123");
        assert_eq!(key.open("other-card", &sealed), Err(SealError::Open));
        assert_eq!(
            SecretsKey::random().open("team-judge", &sealed),
            Err(SealError::Open)
        );
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(key.open("team-judge", &tampered), Err(SealError::Open));
        assert_eq!(key.open("team-judge", &sealed[..5]), Err(SealError::Open));
        assert_ne!(key.seal("team-judge", "sk-live-123").unwrap(), sealed);
    }

    #[test]
    fn keys_parse_from_64_hex_digits_only() {
        let key = SecretsKey::random();
        let parsed: SecretsKey = key.to_hex().parse().unwrap();
        assert_eq!(parsed.to_hex(), key.to_hex());
        assert!("abc".parse::<SecretsKey>().is_err());
        assert!("zz".repeat(32).parse::<SecretsKey>().is_err());
        assert_eq!(format!("{key:?}"), "SecretsKey(..)");
        assert_eq!(key.seal("c", ""), Err(SealError::BadSecret));
        assert!(key.seal("c", &"k".repeat(MAX_KEY_BYTES + 1)).is_err());
    }
}
