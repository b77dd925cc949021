//! `/api/auth/*`, `/api/me` and `/api/teams/*`: the first-run flow, sign-in and out and the
//! session cookie here; sign-up and invites in `registration`, teams and members in `teams`, API
//! tokens in `tokens`.

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use lachesis_shared::accounts::{AuthState, Login, Me, NewAccount, UserInfo};

use super::limiter::client_key;
use super::secrets::{MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS};
use super::{SESSION_COOKIE, Viewer, registration, store, teams, tokens};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;
use crate::trajectory::valid_run_name;

/// The longest user or team name (what `valid_run_name` and the tables' CHECKs accept).
pub const MAX_NAME_BYTES: usize = 64;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/auth/state", get(auth_state))
        .route("/api/auth/setup", post(setup))
        .route("/api/auth/register", post(registration::register))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/me", get(me))
        .route("/api/teams", post(teams::create_team))
        .route(
            "/api/teams/{team}/members",
            get(teams::list_members).post(teams::put_member),
        )
        .route(
            "/api/teams/{team}/members/{username}",
            delete(teams::remove_member),
        )
        .route(
            "/api/teams/{team}/tokens",
            get(tokens::list_tokens).post(tokens::create_token),
        )
        .route(
            "/api/teams/{team}/tokens/{id}",
            delete(tokens::revoke_token),
        )
        .route(
            "/api/teams/{team}/invites",
            post(registration::create_invite),
        )
}

/// Names of users and teams follow the same rule as run names (the database checks it too),
/// which also caps them at [`MAX_NAME_BYTES`].
pub(super) fn check_name(kind: &str, name: &str) -> Result<(), AppError> {
    if name.len() <= MAX_NAME_BYTES && valid_run_name(name) {
        Ok(())
    } else {
        Err(AppError::Invalid(format!(
            "{kind} names are 1-{MAX_NAME_BYTES} letters, digits, '.', '_' or '-', starting with a letter or digit"
        )))
    }
}

pub(super) fn check_password(password: &str) -> Result<(), AppError> {
    if password.chars().count() < MIN_PASSWORD_CHARS || password.len() > MAX_PASSWORD_BYTES {
        return Err(AppError::Invalid(format!(
            "passwords are {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_BYTES} bytes long"
        )));
    }
    Ok(())
}

async fn auth_state(State(state): State<AppState>) -> Result<Json<AuthState>, AppError> {
    Ok(Json(AuthState {
        enabled: state.auth.enabled,
        needs_first_owner: store::user_count(&state.db).await? == 0,
        registration: state.accounts.registration,
    }))
}

fn owner_exists() -> AppError {
    AppError::Conflict("the first owner already exists: sign in".into())
}

/// The first-run flow: creates the first user as owner of the first team. Refused once any user
/// exists, before any password is hashed (argon2 is the costly part); an advisory lock makes two
/// racing first runs produce one owner.
async fn setup(
    State(state): State<AppState>,
    Body(account): Body<NewAccount>,
) -> Result<Response, AppError> {
    if store::user_count(&state.db).await? > 0 {
        return Err(owner_exists());
    }
    let team = account
        .team
        .clone()
        .ok_or_else(|| AppError::Invalid("the first owner needs a team name".into()))?;
    check_name("user", &account.username)?;
    check_name("team", &team)?;
    check_password(&account.password)?;
    let hash = state.accounts.hashing.hash(account.password).await?;
    let mut tx = state.db.begin().await?;
    if store::lock_first_owner(&mut tx).await? > 0 {
        return Err(owner_exists());
    }
    let user = store::create_user(&mut tx, &account.username, &hash).await?;
    store::create_team(&mut tx, &team, user).await?;
    tx.commit().await?;
    signed_in(&state, user, account.username).await
}

/// A dummy argon2id hash, verified when the username is unknown so that both failures take the
/// same time.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$yZ2VkVqgbq0ZGvmP2SBc7m8e2Kp5d1Zr3D6ZjJXxg8E";

async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    Body(login): Body<Login>,
) -> Result<Response, AppError> {
    let address = format!("addr:{}", client_key(peer.ip()));
    let limiter = &state.auth.limiter;
    let too_many = |retry_after_s| AppError::TooManyAttempts { retry_after_s };
    // No such user can exist, and an unbounded name must not become a limiter key: counted
    // against the address alone.
    if login.username.len() > MAX_NAME_BYTES || login.password.len() > MAX_PASSWORD_BYTES {
        let keys = [address];
        limiter.check(&keys).map_err(too_many)?;
        limiter.record(&keys);
        return Err(AppError::BadCredentials);
    }
    let keys = [format!("user:{}", login.username.to_lowercase()), address];
    limiter.check(&keys).map_err(too_many)?;
    let found = store::user_by_name(&state.db, &login.username).await?;
    let stored = found
        .as_ref()
        .map_or(DUMMY_HASH.to_string(), |(_, _, hash)| hash.clone());
    let matches = state
        .accounts
        .hashing
        .verify(login.password, stored)
        .await?;
    match found {
        Some((id, username, _)) if matches => {
            limiter.forget(&keys);
            signed_in(&state, id, username).await
        }
        _ => {
            limiter.record(&keys);
            Err(AppError::BadCredentials)
        }
    }
}

/// Starts a session: the cookie plus the body of `/api/me`.
pub(super) async fn signed_in(
    state: &AppState,
    user: i64,
    username: String,
) -> Result<Response, AppError> {
    let policy = &state.accounts;
    let (secret, csrf_token) =
        store::create_session(&state.db, user, policy.session_days, policy.session_idle).await?;
    let viewer = Viewer::User {
        id: user,
        username,
        csrf_token,
    };
    let body = me_for(state, &viewer).await?;
    // `__Host-` requires exactly this: Secure, Path=/ and no Domain.
    let cookie = format!(
        "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}",
        u64::from(policy.session_days) * 24 * 3600
    );
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| AppError::Internal(e.to_string()))?,
    );
    Ok(response)
}

/// The session's own CSRF token must come with it (`Writer`), so a page elsewhere cannot sign
/// a person out.
async fn logout(
    State(state): State<AppState>,
    _: Writer,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    if let Some(secret) = super::session_cookie(&headers) {
        store::delete_session(&state.db, secret).await?;
    }
    let cookie = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0");
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| AppError::Internal(e.to_string()))?,
    );
    Ok(response)
}

async fn me_for(state: &AppState, viewer: &Viewer) -> Result<Me, AppError> {
    Ok(match viewer {
        Viewer::User {
            id,
            username,
            csrf_token,
        } => Me {
            user: Some(UserInfo {
                id: *id,
                username: username.clone(),
            }),
            teams: store::memberships(&state.db, *id).await?,
            csrf_token: Some(csrf_token.clone()),
            auth_enabled: state.auth.enabled,
        },
        Viewer::Open => Me {
            user: None,
            teams: Vec::new(),
            csrf_token: None,
            auth_enabled: false,
        },
        _ => return Err(AppError::NotSignedIn),
    })
}

async fn me(State(state): State<AppState>, viewer: Viewer) -> Result<Json<Me>, AppError> {
    Ok(Json(me_for(&state, &viewer).await?))
}
