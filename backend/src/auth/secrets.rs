//! Secrets: argon2id password hashes, random session and API tokens, and the SHA-256 under which
//! tokens are stored. Tokens carry 256 random bits, so a fast hash suffices for them; passwords are
//! chosen by people and get argon2id, through [`PasswordHashing`], which bounds how many run at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::app::AppError;

/// Prefix of API tokens, so leaked ones are recognisable in logs and secret scanners.
pub const API_TOKEN_PREFIX: &str = "lch_";
/// Prefix of invite codes (not `lch_`: an invite is not a credential for the API).
pub const INVITE_PREFIX: &str = "inv_";

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

pub fn new_invite_code() -> String {
    format!("{INVITE_PREFIX}{}", random_secret())
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

/// The gate every argon2 run passes: at most `concurrency` hashes and verifications at once, each
/// on a blocking thread, so a flood of sign-ins and sign-ups waits here instead of taking every
/// blocking thread and 19 MiB apiece. The permit travels with the blocking work, so a client that
/// disconnects mid-hash does not free a slot before the hash is done.
#[derive(Debug)]
pub struct PasswordHashing {
    permits: Arc<Semaphore>,
    counts: Arc<HashingCounts>,
}

#[derive(Debug, Default)]
struct HashingCounts {
    runs: AtomicU64,
    running: AtomicUsize,
    most_running: AtomicUsize,
}

impl PasswordHashing {
    pub fn new(concurrency: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            counts: Arc::default(),
        }
    }

    pub async fn hash(&self, password: String) -> Result<String, AppError> {
        self.run(move || hash_password(&password))
            .await?
            .map_err(|e| AppError::Internal(e.to_string()))
    }

    pub async fn verify(&self, password: String, stored: String) -> Result<bool, AppError> {
        self.run(move || verify_password(&password, &stored)).await
    }

    /// argon2 runs so far (hashes and verifications), for tests and operators.
    pub fn runs(&self) -> u64 {
        self.counts.runs.load(Ordering::Relaxed)
    }

    /// The most argon2 runs that were ever under way at once.
    pub fn most_at_once(&self) -> usize {
        self.counts.most_running.load(Ordering::Relaxed)
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, AppError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| AppError::Internal(e.to_string()))?;
        let counts = self.counts.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            counts.runs.fetch_add(1, Ordering::Relaxed);
            let now = counts.running.fetch_add(1, Ordering::SeqCst) + 1;
            counts.most_running.fetch_max(now, Ordering::SeqCst);
            let result = work();
            counts.running.fetch_sub(1, Ordering::SeqCst);
            result
        })
        .await
        .map_err(|e| AppError::Internal(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_hashes_run_at_once_than_the_gate_allows() {
        let gate = Arc::new(PasswordHashing::new(2));
        let attempts = (0..8).map(|i| {
            let gate = gate.clone();
            tokio::spawn(async move { gate.hash(format!("password number {i}")).await })
        });
        for attempt in futures::future::join_all(attempts).await {
            assert!(attempt.unwrap().unwrap().starts_with("$argon2id$"));
        }
        assert_eq!(gate.runs(), 8);
        assert!(
            (1..=2).contains(&gate.most_at_once()),
            "{}",
            gate.most_at_once()
        );
        let stored = gate.hash("correct horse battery".into()).await.unwrap();
        assert!(
            gate.verify("correct horse battery".into(), stored)
                .await
                .unwrap()
        );
        assert_eq!(gate.runs(), 10);
    }

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
