//! Calls to judge endpoints that teams chose. A team card's `base_url` is the team's to pick, so
//! the server must never let it reach what only the server can reach: loopback, private networks,
//! link-local (cloud metadata at 169.254.169.254) and the like. The check runs when the card is
//! listed and again, inside the HTTP client's own resolver, at every connection, so a name that
//! later resolves elsewhere (DNS rebinding) is refused too. Redirects are never followed, answers
//! are read up to a size cap, and every call has a deadline.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why a team's endpoint is refused or its answer dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    #[error("a team judge's base_url must be an https:// URL: {0}")]
    NotHttps(String),
    #[error("a team judge's base_url is not a valid URL: {0}")]
    BadUrl(String),
    #[error("{host} resolves to {addr}, which is not a public address")]
    NotPublic { host: String, addr: IpAddr },
    #[error("{0} does not resolve to any address")]
    Unresolved(String),
    #[error("the judge's answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Http(String),
}

/// Whether `ip` is an address anyone on the internet could also reach: not loopback, private,
/// link-local, shared (CGNAT), documentation, benchmarking, multicast, unspecified or reserved.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local (fc00::/7) and link-local (fe80::/10).
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                // Documentation (2001:db8::/32).
                || (first == 0x2001 && v6.segments()[1] == 0x0db8)
                // IPv4-compatible and NAT64 forms carry an IPv4 address that may be private.
                || (first == 0x0064 && v6.segments()[1] == 0xff9b)
                || v6.segments()[..6].iter().all(|s| *s == 0))
        }
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    !(v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        // Shared address space (100.64.0.0/10), used by carrier NAT and some cloud metadata.
        || (a == 100 && (64..128).contains(&b))
        // Benchmarking (198.18.0.0/15) and reserved (240.0.0.0/4).
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
        // IETF protocol assignments (192.0.0.0/24).
        || (a == 192 && b == 0 && v4.octets()[2] == 0))
}

/// Checks a team card's `base_url` as it is listed: https, and every address its host resolves
/// to now is public.
pub async fn check_team_url(base_url: &str) -> Result<(), OutboundError> {
    let url = reqwest::Url::parse(base_url).map_err(|e| OutboundError::BadUrl(e.to_string()))?;
    if url.scheme() != "https" {
        return Err(OutboundError::NotHttps(base_url.to_string()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(OutboundError::BadUrl(
            "credentials in the URL are not accepted; give the key as api_key".into(),
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| OutboundError::BadUrl(base_url.to_string()))?;
    let port = url.port_or_known_default().unwrap_or(443);
    public_addrs(host, port).await.map(|_| ())
}

/// The addresses `host` resolves to, all of them public (one private address refuses the host:
/// a client may pick any of them).
async fn public_addrs(host: &str, port: u16) -> Result<Vec<SocketAddr>, OutboundError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|_| OutboundError::Unresolved(host.to_string()))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(OutboundError::Unresolved(host.to_string()));
    }
    if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
        return Err(OutboundError::NotPublic {
            host: host.to_string(),
            addr: bad.ip(),
        });
    }
    Ok(addrs)
}

/// The HTTP client's resolver for team endpoints: resolves, then refuses non-public answers, so
/// the address checked is the address connected to.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = public_addrs(&host, 0)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Deadline and size cap of one judge call.
#[derive(Debug, Clone, Copy)]
pub struct OutboundLimits {
    pub timeout: Duration,
    pub max_response_bytes: usize,
}

impl Default for OutboundLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response_bytes: 256 * 1024,
        }
    }
}

/// Two clients: one for the operator's own endpoints (any address: a vLLM on this machine is
/// normal), one for teams' (public addresses only, no proxy, which would resolve names itself).
/// Neither follows redirects.
#[derive(Clone)]
pub struct JudgeHttp {
    operator: reqwest::Client,
    team: reqwest::Client,
    pub limits: OutboundLimits,
}

impl JudgeHttp {
    pub fn new(limits: OutboundLimits) -> Self {
        let base = || {
            reqwest::Client::builder()
                .timeout(limits.timeout)
                .connect_timeout(limits.timeout.min(Duration::from_secs(10)))
                .redirect(reqwest::redirect::Policy::none())
        };
        Self {
            operator: base().build().unwrap_or_default(),
            team: base()
                .no_proxy()
                .https_only(true)
                .dns_resolver(Arc::new(PublicOnly))
                .build()
                .unwrap_or_default(),
            limits,
        }
    }

    /// POSTs `body` as JSON and reads the JSON answer, at most `max_response_bytes` of it.
    pub async fn post_json(
        &self,
        team_endpoint: bool,
        url: &str,
        key: Option<&str>,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, OutboundError> {
        let client = if team_endpoint {
            let parsed =
                reqwest::Url::parse(url).map_err(|e| OutboundError::BadUrl(e.to_string()))?;
            // IP literals never reach the resolver: checked here.
            if let Some(host) = parsed.host_str()
                && let Ok(ip) = host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                && !is_public(ip)
            {
                return Err(OutboundError::NotPublic {
                    host: host.to_string(),
                    addr: ip,
                });
            }
            &self.team
        } else {
            &self.operator
        };
        let mut request = client.post(url).json(body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(describe)?;
        let status = response.status();
        if !status.is_success() {
            return Err(OutboundError::Http(format!(
                "the endpoint answered {status}"
            )));
        }
        let cap = self.limits.max_response_bytes;
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(OutboundError::TooLarge(cap));
        }
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            if bytes.len() + chunk.len() > cap {
                return Err(OutboundError::TooLarge(cap));
            }
            bytes.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| OutboundError::Http(format!("the answer is not JSON: {e}")))
    }
}

/// A client error with its cause (reqwest's top-level message alone hides a resolver refusal).
fn describe(e: reqwest::Error) -> OutboundError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    OutboundError::Http(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for addr in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::127.0.0.1",
        ] {
            assert!(
                !is_public(addr.parse().unwrap()),
                "{addr} counted as public"
            );
        }
        for addr in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "93.184.216.34"] {
            assert!(
                is_public(addr.parse().unwrap()),
                "{addr} counted as private"
            );
        }
    }

    #[tokio::test]
    async fn listing_refuses_plain_http_loopback_names_and_metadata_addresses() {
        assert!(matches!(
            check_team_url("http://1.1.1.1/v1").await,
            Err(OutboundError::NotHttps(_))
        ));
        assert!(matches!(
            check_team_url("https://localhost:9/v1").await,
            Err(OutboundError::NotPublic { .. })
        ));
        assert!(matches!(
            check_team_url("https://169.254.169.254/v1").await,
            Err(OutboundError::NotPublic { .. })
        ));
        assert!(matches!(
            check_team_url("https://[::1]:8000/v1").await,
            Err(OutboundError::NotPublic { .. })
        ));
        assert!(matches!(
            check_team_url("https://user:pw@1.1.1.1/v1").await,
            Err(OutboundError::BadUrl(_))
        ));
        assert!(check_team_url("not a url").await.is_err());
    }
}
