//! Who is calling, and what they may do.
//!
//! Authentication is on whenever the server binds beyond loopback (and on request otherwise).
//! With it on, a caller is a signed-in user (session cookie), an API token (team-scoped, optionally
//! run-scoped, optionally expiring, sent as `Authorization: Bearer`), the server's admin token, or
//! anonymous. With it off, every caller acts with full rights ([`Viewer::Open`]), which is the
//! single-user laptop case. Who may create accounts, and how fast, is the [`policy`].
//!
//! Runs belong to a team. Members of the team read them (viewers) and write them (members and
//! owners); public runs are readable by anyone. A run that does not exist, and one the caller may
//! not see, get the same 404 so that names do not leak across teams.

mod cache;
mod limiter;
pub mod policy;
mod registration;
pub mod routes;
pub mod secrets;
pub mod store;
mod teams;
mod tokens;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use lachesis_shared::accounts::Role;
use lachesis_shared::live::Topic;

pub use crate::app::AppError;
use crate::app::AppState;
pub use limiter::WindowLimiter;

/// The session cookie's name. `__Host-`: browsers take it only with `Secure`, `Path=/` and no
/// `Domain`, so neither a subdomain nor a plain-http page on the same host can plant or shadow it.
pub const SESSION_COOKIE: &str = "__Host-lachesis_session";
/// The header carrying the session's CSRF token on cookie-authenticated mutations.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Authentication settings, fixed at start.
pub struct AuthSettings {
    pub enabled: bool,
    /// The server's own token (`--api-token`): full rights, for operators and in-process workers.
    pub admin_token: Option<Arc<str>>,
    /// Failed sign-ins per username and per client address.
    pub limiter: WindowLimiter,
    /// Token hash -> the token's caller (`None`: no such live token).
    pub tokens: cache::TtlCache<Vec<u8>, Option<Viewer>>,
    /// Run -> its owner, for runs that exist.
    pub owners: cache::TtlCache<String, store::RunOwner>,
}

impl AuthSettings {
    pub fn new(enabled: bool, admin_token: Option<Arc<str>>) -> Self {
        Self {
            enabled,
            admin_token,
            limiter: WindowLimiter::sign_in(),
            tokens: cache::TtlCache::default(),
            owners: cache::TtlCache::default(),
        }
    }

    /// After a token is revoked or a run's visibility changes through this instance.
    pub fn forget_cached(&self) {
        self.tokens.clear();
        self.owners.clear();
    }
}

/// The caller of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Viewer {
    /// Authentication is off: full rights.
    Open,
    /// The server's admin token.
    Admin,
    Anonymous,
    User {
        id: i64,
        username: String,
        csrf_token: String,
    },
    Token {
        id: i64,
        team_id: i64,
        run: Option<String>,
        read_only: bool,
        /// May call the embedded model (`/v1/*`, `/generate`).
        inference: bool,
    },
}

/// What a request does to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        if let Some(viewer) = parts.extensions.get::<Viewer>() {
            return Ok(viewer.clone());
        }
        let viewer = identify(&parts.headers, state).await?;
        parts.extensions.insert(viewer.clone());
        Ok(viewer)
    }
}

/// The caller of a route that changes something, its CSRF token checked before the handler
/// runs: a browser session must echo its token in `X-CSRF-Token`; bearer tokens and the open
/// (accounts off) mode carry no cookie to ride on and pass as they are.
pub struct Writer(pub Viewer);

impl FromRequestParts<AppState> for Writer {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let viewer = Viewer::from_request_parts(parts, state).await?;
        viewer.check_csrf(&parts.headers)?;
        Ok(Self(viewer))
    }
}

/// Reads the caller's credentials. A wrong, revoked or expired bearer token is an error (the client
/// meant to authenticate); a stale or idle session cookie just means anonymous.
pub async fn identify(headers: &HeaderMap, state: &AppState) -> Result<Viewer, AppError> {
    let settings = &state.auth;
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let (Some(given), Some(admin)) = (bearer, &settings.admin_token)
        && secrets::constant_time_eq(given.as_bytes(), admin.as_bytes())
    {
        return Ok(Viewer::Admin);
    }
    if !settings.enabled {
        return Ok(Viewer::Open);
    }
    if let Some(token) = bearer {
        let hash = secrets::token_hash(token);
        let viewer = match settings.tokens.get(&hash) {
            Some(viewer) => viewer,
            None => {
                let viewer = store::token_viewer(&state.db, token).await?;
                settings.tokens.put(hash, viewer.clone());
                viewer
            }
        };
        return viewer.ok_or(AppError::NotSignedIn);
    }
    match session_cookie(headers) {
        Some(secret) => Ok(
            store::session_viewer(&state.db, secret, state.accounts.session_idle)
                .await?
                .unwrap_or(Viewer::Anonymous),
        ),
        None => Ok(Viewer::Anonymous),
    }
}

/// A run's owner, remembered for a few seconds once the run exists.
async fn owner_of(state: &AppState, run: &str) -> Result<Option<store::RunOwner>, sqlx::Error> {
    if let Some(owner) = state.auth.owners.get(&run.to_string()) {
        return Ok(Some(owner));
    }
    let owner = store::run_owner(&state.db, run).await?;
    if let Some(owner) = &owner {
        state.auth.owners.put(run.to_string(), owner.clone());
    }
    Ok(owner)
}

/// The session secret from the `Cookie` header, if any.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

impl Viewer {
    pub fn username(&self) -> Option<&str> {
        match self {
            Viewer::User { username, .. } => Some(username),
            _ => None,
        }
    }

    pub fn is_full_rights(&self) -> bool {
        matches!(self, Viewer::Open | Viewer::Admin)
    }

    /// Cookie-authenticated mutations must repeat the session's CSRF token in a header (a
    /// cross-site form can make the browser send the cookie, never a custom header).
    pub fn check_csrf(&self, headers: &HeaderMap) -> Result<(), AppError> {
        let Viewer::User { csrf_token, .. } = self else {
            return Ok(());
        };
        let given = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        match given {
            Some(given) if secrets::constant_time_eq(given.as_bytes(), csrf_token.as_bytes()) => {
                Ok(())
            }
            _ => Err(AppError::Csrf),
        }
    }

    /// The run Atropos's legacy paths (no `/runs/{run}` prefix) address for this caller: a
    /// run-scoped token's run, so unmodified atroposlib clients work with such a token; otherwise
    /// the shared `default` run.
    pub fn legacy_run(&self) -> &str {
        match self {
            Viewer::Token { run: Some(run), .. } => run,
            _ => crate::trajectory::DEFAULT_RUN,
        }
    }

    /// Whether this caller may `access` run `run`. A token may create a run it writes to: the run
    /// then belongs to the token's team (`create`).
    pub async fn check_run(
        &self,
        state: &AppState,
        run: &str,
        access: Access,
        create: bool,
    ) -> Result<(), AppError> {
        const RUN: &str = "run";
        if self.is_full_rights() {
            return Ok(());
        }
        if let Viewer::Token {
            run: Some(scope), ..
        } = self
            && scope != run
        {
            return Err(AppError::NotFound(RUN));
        }
        let mut owner = owner_of(state, run).await?;
        if owner.is_none()
            && create
            && access == Access::Write
            && let Viewer::Token {
                team_id,
                read_only: false,
                ..
            } = self
        {
            store::create_team_run(&state.db, run, *team_id).await?;
            owner = owner_of(state, run).await?;
        }
        let Some(owner) = owner else {
            return Err(self.not_found_or_sign_in(RUN));
        };
        let readable_by_public = owner.public && access == Access::Read;
        let role = match self {
            Viewer::Token {
                team_id, read_only, ..
            } if owner.team_id == Some(*team_id) => Some(if *read_only {
                Role::Viewer
            } else {
                Role::Member
            }),
            Viewer::User { id, .. } => match owner.team_id {
                Some(team) => store::role_in_team(&state.db, *id, team).await?,
                None => None,
            },
            _ => None,
        };
        match (role, access) {
            (Some(_), Access::Read) => Ok(()),
            (Some(role), Access::Write) if role.can_write() => Ok(()),
            (Some(_), Access::Write) => Err(AppError::Forbidden(
                "viewers and read-only tokens cannot change a run",
            )),
            (None, _) if readable_by_public => Ok(()),
            (None, Access::Write) if owner.public && *self != Viewer::Anonymous => Err(
                AppError::Forbidden("public runs are read-only for people outside their team"),
            ),
            (None, _) => Err(self.not_found_or_sign_in(RUN)),
        }
    }

    fn not_found_or_sign_in(&self, what: &'static str) -> AppError {
        match self {
            Viewer::Anonymous => AppError::NotSignedIn,
            _ => AppError::NotFound(what),
        }
    }

    /// Whether the live hub may deliver `topic` to this caller.
    pub async fn can_read_topic(
        &self,
        state: &AppState,
        topic: &Topic,
    ) -> Result<bool, sqlx::Error> {
        match topic.run() {
            Some(run) => match self.check_run(state, run, Access::Read, false).await {
                Ok(()) => Ok(true),
                Err(AppError::Database(e)) => Err(e),
                Err(_) => Ok(false),
            },
            // The marketplace feed, arena votes and battles being answered are public; spatial scenes and tool episodes (generated tasks
            // and the model's attempts at them, which run while someone watches) are for anyone
            // signed in; a game, to whoever may play it, or to anyone once it is public.
            None => match topic {
                Topic::Marketplace | Topic::Arena { .. } | Topic::Battle { .. } => Ok(true),
                Topic::Scene { .. } | Topic::Tools | Topic::Protein => {
                    Ok(!matches!(self, Viewer::Anonymous))
                }
                Topic::Game { game } => crate::chess::can_watch(self, state, game).await,
                _ => Ok(self.is_full_rights()),
            },
        }
    }
}
