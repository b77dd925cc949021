//! Who is voting: a signed-in person, or an anonymous visitor with a voting token when the host
//! allows them. API tokens belong to programs, which do not vote.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use super::settings::ArenaVoters;
use super::store;
use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::auth::secrets::token_hash;
use crate::hosting::slots::address_key;

/// The header carrying an anonymous visitor's voting token.
pub const VISITOR_HEADER: &str = "x-arena-visitor";

/// The caller's address (an IPv6 client by its /64), or the unspecified address when the server
/// runs without connection info.
pub fn caller_address(parts: &Parts) -> IpAddr {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| address_key(info.0.ip()))
}

/// A voter: a stable key (`user:ID`, `visitor:ID`, or `open:ADDRESS` with accounts off) and the
/// address the request came from.
#[derive(Debug, Clone)]
pub struct Voter {
    pub key: String,
    pub address: IpAddr,
}

impl FromRequestParts<AppState> for Voter {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let viewer = Viewer::from_request_parts(parts, state).await?;
        // A session's vote must carry its CSRF token like any other change; the visitor header
        // cannot be sent by a cross-site form, so it needs none.
        viewer.check_csrf(&parts.headers)?;
        let address = caller_address(parts);
        if let Viewer::User { id, .. } = viewer {
            return Ok(Voter {
                key: format!("user:{id}"),
                address,
            });
        }
        if matches!(viewer, Viewer::Token { .. }) {
            return Err(AppError::Forbidden(
                "API tokens do not vote: sign in, or vote as a visitor",
            ));
        }
        let visitors_allowed =
            state.arena.settings.voters == ArenaVoters::Visitors || viewer.is_full_rights();
        if let Some(token) = parts
            .headers
            .get(VISITOR_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|t| !t.is_empty())
        {
            if !visitors_allowed {
                return Err(AppError::Forbidden(
                    "this arena takes votes from signed-in people only",
                ));
            }
            return match store::visitor(&state.db, &token_hash(token)).await? {
                Some(id) => Ok(Voter {
                    key: format!("visitor:{id}"),
                    address,
                }),
                None => Err(AppError::NotSignedIn),
            };
        }
        match viewer {
            // Accounts are off (a local server): the address is the voter.
            Viewer::Open | Viewer::Admin => Ok(Voter {
                key: format!("open:{address}"),
                address,
            }),
            _ => Err(AppError::NotSignedIn),
        }
    }
}
