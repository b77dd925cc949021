//! Secrets: argon2id password hashes, random session and API tokens, and the SHA-256 under which
//! tokens are stored. Tokens carry 256 random bits, so a fast hash suffices for them; passwords are
//! chosen by people and get argon2id.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha2::{Digest, Sha256};

/// Prefix of API tokens, so leaked ones are recognisable in logs and secret scanners.
pub const API_TOKEN_PREFIX: &str = "lch_";

pub const MIN_PASSWORD_CHARS: usize = 10;
/// argon2 accepts far more, but a megabyte "password" is a denial of service, not a password.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// argon2id with the crate's defaults (19 MiB, 2 passes: OWASP's recommended minimum).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::generate(&mut OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// Checks a password against a stored PHC string; a malformed hash counts as a mismatch.
pub fn verify_password(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// 32 random bytes as lowercase hex.
pub fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    hex(&bytes)
}

pub fn new_api_token() -> String {
    format!("{API_TOKEN_PREFIX}{}", random_secret())
}

/// The stored form of a token or session secret.
pub fn token_hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equality that takes the same time wherever the first difference is.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_only_against_their_own_hash() {
        let stored = hash_password("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery", &stored));
        assert!(!verify_password("correct horse batterY", &stored));
        assert!(!verify_password("anything", "not a phc string"));
    }

    #[test]
    fn tokens_are_random_and_hash_to_32_bytes() {
        let (a, b) = (new_api_token(), new_api_token());
        assert_ne!(a, b);
        assert!(a.starts_with(API_TOKEN_PREFIX) && a.len() == API_TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash(&a).len(), 32);
        assert_ne!(token_hash(&a), token_hash(&b));
    }
}
