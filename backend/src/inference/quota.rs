//! Per-caller token rate: a token bucket per caller, in a table of bounded size.
//!
//! A caller is its API token (the SHA-256 of the `Authorization: Bearer` value), else its session
//! cookie, else its address (an IPv6 client by its /64, which one subscriber usually holds
//! whole). With accounts on, which serving beyond loopback requires, `require_caller` has
//! already checked the token or session, so a caller cannot mint fresh identities by inventing
//! credentials.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;

use super::InferenceError;
use super::limits::InferenceLimits;
use crate::app::AppState;
use crate::auth::secrets::token_hash;
use crate::hosting::rate::{Rate, RateTable};
use crate::hosting::slots::address_key;

/// Who a request's tokens are counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CallerKey {
    /// SHA-256 of the bearer token.
    Token(Vec<u8>),
    /// SHA-256 of the session cookie (hashed so a long cookie costs the table no more).
    Session(Vec<u8>),
    /// An IPv4 address, or the /64 network of an IPv6 one.
    Network(IpAddr),
    /// Served without connection info (an embedding router): every such caller shares one.
    Unknown,
}

impl CallerKey {
    pub fn identify(headers: &HeaderMap, peer: Option<SocketAddr>) -> Self {
        if let Some(token) = bearer(headers) {
            return CallerKey::Token(token_hash(token));
        }
        if let Some(session) = crate::auth::session_cookie(headers).filter(|s| !s.is_empty()) {
            return CallerKey::Session(token_hash(session));
        }
        match peer {
            Some(peer) => CallerKey::Network(address_key(peer.ip())),
            None => CallerKey::Unknown,
        }
    }
}

impl FromRequestParts<AppState> for CallerKey {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| info.0);
        Ok(CallerKey::identify(&parts.headers, peer))
    }
}

/// The bearer token, parsed exactly as `crate::auth::identify` parses it, so the key is the
/// credential that was checked and not some other spelling of the header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// The token balances of recently seen callers.
#[derive(Debug, Default)]
pub struct CallerQuotas {
    table: RateTable<CallerKey>,
}

fn rate(limits: &InferenceLimits) -> Rate {
    Rate {
        per_minute: limits.tokens_per_minute,
        burst: limits.burst_tokens,
        remember: limits.quota_callers,
    }
}

impl CallerQuotas {
    /// Takes `cost` tokens from the caller's bucket, or says when they will be there.
    pub fn charge(
        &self,
        caller: &CallerKey,
        cost: u64,
        limits: &InferenceLimits,
        now: Instant,
    ) -> Result<(), InferenceError> {
        if cost > limits.burst_tokens {
            return Err(InferenceError::OverBurst {
                cost,
                burst: limits.burst_tokens,
            });
        }
        self.table
            .charge(caller, cost, &rate(limits), now)
            .map_err(|limited| InferenceError::RateLimited {
                cost,
                available: limited.available,
                per_minute: limits.tokens_per_minute,
                retry_after_secs: limited.retry_after_secs,
            })
    }

    /// Gives back tokens a charged request did not use (a shorter answer, a failed request).
    pub fn refund(&self, caller: &CallerKey, tokens: u64, limits: &InferenceLimits, now: Instant) {
        self.table.refund(caller, tokens, &rate(limits), now);
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.table.remembered()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::HeaderValue;

    use super::*;

    fn limits(per_minute: u64, burst: u64, callers: usize) -> InferenceLimits {
        InferenceLimits {
            tokens_per_minute: per_minute,
            burst_tokens: burst,
            quota_callers: callers,
            ..InferenceLimits::default()
        }
    }

    fn ip(text: &str) -> CallerKey {
        CallerKey::Network(address_key(text.parse().unwrap()))
    }

    #[test]
    fn a_caller_is_its_token_then_its_session_then_its_network() {
        let peer: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        let mut headers = HeaderMap::new();
        assert_eq!(CallerKey::identify(&headers, Some(peer)), ip("10.1.2.3"));
        assert_eq!(CallerKey::identify(&headers, None), CallerKey::Unknown);
        let cookie = format!("{}=abc", crate::auth::SESSION_COOKIE);
        headers.insert("cookie", HeaderValue::from_str(&cookie).unwrap());
        assert_eq!(
            CallerKey::identify(&headers, Some(peer)),
            CallerKey::Session(token_hash("abc"))
        );
        headers.insert("authorization", HeaderValue::from_static("Bearer tok"));
        assert_eq!(
            CallerKey::identify(&headers, Some(peer)),
            CallerKey::Token(token_hash("tok"))
        );
    }

    #[test]
    fn ipv6_callers_share_their_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(ip("2001:db8:1:2:aaaa::1"), ip("2001:db8:1:2:bbbb::9"));
        assert_ne!(ip("2001:db8:1:2::1"), ip("2001:db8:1:3::1"));
        assert_eq!(ip("::ffff:192.0.2.7"), ip("192.0.2.7"));
    }

    #[test]
    fn a_bucket_spends_its_burst_then_refills_at_the_rate() {
        let limits = limits(60, 100, 10);
        let quotas = CallerQuotas::default();
        let caller = ip("192.0.2.1");
        let start = Instant::now();
        quotas.charge(&caller, 70, &limits, start).unwrap();
        let refused = quotas.charge(&caller, 40, &limits, start).unwrap_err();
        // 30 tokens left, 10 missing, one token a second.
        assert!(
            matches!(
                refused,
                InferenceError::RateLimited {
                    available: 30,
                    retry_after_secs: 10,
                    ..
                }
            ),
            "{refused:?}"
        );
        let later = start + Duration::from_secs(10);
        quotas.charge(&caller, 40, &limits, later).unwrap();
        // Another caller has its own bucket.
        quotas
            .charge(&ip("192.0.2.2"), 100, &limits, later)
            .unwrap();
    }

    #[test]
    fn a_request_larger_than_the_burst_can_never_pass() {
        let limits = limits(60, 100, 10);
        let refused = CallerQuotas::default()
            .charge(&CallerKey::Unknown, 101, &limits, Instant::now())
            .unwrap_err();
        assert!(matches!(
            refused,
            InferenceError::OverBurst {
                cost: 101,
                burst: 100
            }
        ));
    }

    #[test]
    fn unused_tokens_are_refunded_up_to_the_burst() {
        let limits = limits(1, 100, 10);
        let quotas = CallerQuotas::default();
        let caller = CallerKey::Unknown;
        let now = Instant::now();
        quotas.charge(&caller, 100, &limits, now).unwrap();
        quotas.refund(&caller, 60, &limits, now);
        quotas.charge(&caller, 60, &limits, now).unwrap();
        quotas.refund(&caller, 1000, &limits, now);
        assert!(quotas.charge(&caller, 100, &limits, now).is_ok());
        assert!(quotas.charge(&caller, 1, &limits, now).is_err());
    }

    #[test]
    fn the_table_forgets_the_least_recently_charged_callers() {
        let limits = limits(1, 10, 2);
        let quotas = CallerQuotas::default();
        let now = Instant::now();
        let (a, b, c) = (ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3"));
        quotas.charge(&a, 10, &limits, now).unwrap();
        quotas.charge(&b, 10, &limits, now).unwrap();
        // `a` is charged again (and refused), so `b` is now the least recent.
        assert!(quotas.charge(&a, 1, &limits, now).is_err());
        quotas.charge(&c, 10, &limits, now).unwrap();
        assert_eq!(quotas.remembered(), 2);
        assert!(
            quotas.charge(&a, 1, &limits, now).is_err(),
            "a is remembered"
        );
        quotas.charge(&b, 10, &limits, now).unwrap();
        assert_eq!(quotas.remembered(), 2);
    }
}
