//! With accounts off every caller has full rights, which is safe only while the callers are this
//! machine's own programs. A web page the user visits is not one of them, yet the browser will
//! send its requests to 127.0.0.1: by a form or `fetch` to the address (cross-site, with an
//! `Origin`), by a WebSocket (no CORS at all), or under the page's own name re-pointed at
//! 127.0.0.1 (DNS rebinding: same-origin to the browser, but `Host` carries the page's name).
//! So, with accounts off: the `Host` must be a loopback name; anything that changes state, and
//! every WebSocket, must come from a loopback origin or from no browser page at all; and a body
//! must be declared JSON, which no cross-site form can do without a preflight we never grant.
//! Programs (atroposlib's clients, curl, the runner) send no `Origin` and keep working, including
//! atroposlib's `GET /reset_data`.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::HostingError;
use crate::app::AppState;

pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.auth.enabled {
        return next.run(req).await;
    }
    match check(req.method(), req.uri().path(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The rule itself, apart from the middleware, so it can be tested case by case.
pub fn check(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), HostingError> {
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or("");
        if !is_loopback_authority(host) {
            return Err(HostingError::ForeignHost(host.to_string()));
        }
    }
    let websocket = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let changes_state =
        !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) || path == "/reset_data";
    if changes_state || websocket {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !is_loopback_origin(origin) {
                return Err(HostingError::CrossSite(origin.to_string()));
            }
        }
        let site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        if site.eq_ignore_ascii_case("cross-site") {
            return Err(HostingError::CrossSite(format!("Sec-Fetch-Site: {site}")));
        }
    }
    if has_body(headers) && !websocket && !is_json(headers) {
        return Err(HostingError::NotJson);
    }
    Ok(())
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| {
            essence == "application/json"
                || (essence.starts_with("application/") && essence.ends_with("+json"))
        })
}

/// `localhost`, `*.localhost`, 127.0.0.0/8 or `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, _)) => inside,
            None => return false,
        }
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && is_loopback_authority(authority)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn loopback_names_pass_and_others_are_refused() {
        for host in [
            "127.0.0.1:8000",
            "localhost",
            "app.localhost:80",
            "[::1]:8000",
            "127.1.2.3",
        ] {
            assert!(
                check(&Method::GET, "/status", &headers(&[("host", host)])).is_ok(),
                "{host}"
            );
        }
        for host in [
            "evil.example:8000",
            "192.168.1.4",
            "[::2]:80",
            "localhost.evil.example",
        ] {
            assert!(matches!(
                check(&Method::GET, "/status", &headers(&[("host", host)])),
                Err(HostingError::ForeignHost(_))
            ));
        }
    }

    #[test]
    fn cross_site_changes_and_sockets_are_refused_and_programs_pass() {
        let local = ("host", "127.0.0.1:8000");
        let evil = ("origin", "https://evil.example");
        let json = ("content-type", "application/json");
        let len = ("content-length", "2");
        assert!(check(&Method::POST, "/register", &headers(&[local, json, len])).is_ok());
        assert!(check(&Method::GET, "/reset_data", &headers(&[local])).is_ok());
        assert!(check(&Method::GET, "/status", &headers(&[local, evil])).is_ok());
        assert!(
            check(
                &Method::POST,
                "/register",
                &headers(&[local, ("origin", "http://localhost:8080"), json, len])
            )
            .is_ok()
        );
        for (method, path, extra) in [
            (Method::POST, "/register", evil),
            (Method::GET, "/reset_data", evil),
            (Method::GET, "/reset_data", ("sec-fetch-site", "cross-site")),
            (Method::GET, "/ws", ("origin", "null")),
        ] {
            let mut h = headers(&[local, extra]);
            if path == "/ws" {
                h.insert("upgrade", HeaderValue::from_static("websocket"));
            }
            assert!(
                matches!(check(&method, path, &h), Err(HostingError::CrossSite(_))),
                "{method} {path} {extra:?}"
            );
        }
    }

    #[test]
    fn bodies_must_be_declared_json() {
        let local = ("host", "127.0.0.1");
        let len = ("content-length", "12");
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ] {
            assert_eq!(
                check(
                    &Method::POST,
                    "/scored_data",
                    &headers(&[local, len, ("content-type", ct)])
                ),
                Err(HostingError::NotJson)
            );
        }
        assert_eq!(
            check(&Method::POST, "/x", &headers(&[local, len])),
            Err(HostingError::NotJson)
        );
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "application/merge-patch+json",
        ] {
            assert!(
                check(
                    &Method::POST,
                    "/x",
                    &headers(&[local, len, ("content-type", ct)])
                )
                .is_ok()
            );
        }
        assert!(
            check(
                &Method::POST,
                "/api/auth/logout",
                &headers(&[local, ("content-length", "0")])
            )
            .is_ok()
        );
    }
}
