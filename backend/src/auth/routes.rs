//! `/api/auth/*`, `/api/me` and `/api/teams/*`: the first-run flow, sign-up, sign-in and out,
//! teams, members and API tokens.

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use lachesis_shared::accounts::{
    AuthState, CreatedToken, Login, Me, Member, Membership, NewAccount, NewTeam, NewToken, Role,
    TokenInfo, UserInfo,
};

use super::error::Body;
use super::secrets::{self, MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS};
use super::{AppError, SESSION_COOKIE, Viewer, store};
use crate::app::AppState;
use crate::trajectory::valid_run_name;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/auth/state", get(auth_state))
        .route("/api/auth/setup", post(setup))
        .route("/api/auth/register", post(register))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/me", get(me))
        .route("/api/teams", post(create_team))
        .route(
            "/api/teams/{team}/members",
            get(list_members).post(put_member),
        )
        .route(
            "/api/teams/{team}/members/{username}",
            delete(remove_member),
        )
        .route(
            "/api/teams/{team}/tokens",
            get(list_tokens).post(create_token),
        )
        .route("/api/teams/{team}/tokens/{id}", delete(revoke_token))
}

/// Names of users and teams follow the same rule as run names (the database checks it too).
fn check_name(kind: &str, name: &str) -> Result<(), AppError> {
    if valid_run_name(name) {
        Ok(())
    } else {
        Err(AppError::Invalid(format!(
            "{kind} names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )))
    }
}

fn check_password(password: &str) -> Result<(), AppError> {
    if password.chars().count() < MIN_PASSWORD_CHARS || password.len() > MAX_PASSWORD_BYTES {
        return Err(AppError::Invalid(format!(
            "passwords are {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_BYTES} bytes long"
        )));
    }
    Ok(())
}

async fn hash_password(password: String) -> Result<String, AppError> {
    tokio::task::spawn_blocking(move || secrets::hash_password(&password))
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?
        .map_err(|e| AppError::Internal(e.to_string()))
}

async fn auth_state(State(state): State<AppState>) -> Result<Json<AuthState>, AppError> {
    Ok(Json(AuthState {
        enabled: state.auth.enabled,
        needs_first_owner: store::user_count(&state.db).await? == 0,
    }))
}

/// The first-run flow: creates the first user as owner of the first team. Refused once any user
/// exists; an advisory lock makes two racing first runs produce one owner.
async fn setup(
    State(state): State<AppState>,
    Body(account): Body<NewAccount>,
) -> Result<Response, AppError> {
    let team = account
        .team
        .clone()
        .ok_or_else(|| AppError::Invalid("the first owner needs a team name".into()))?;
    check_name("user", &account.username)?;
    check_name("team", &team)?;
    check_password(&account.password)?;
    let hash = hash_password(account.password).await?;
    let mut tx = state.db.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('lachesis first owner'))")
        .execute(&mut *tx)
        .await?;
    let (users,): (i64,) = sqlx::query_as("SELECT count(*) FROM users")
        .fetch_one(&mut *tx)
        .await?;
    if users > 0 {
        return Err(AppError::Conflict(
            "the first owner already exists: sign in".into(),
        ));
    }
    let user = store::create_user(&mut tx, &account.username, &hash).await?;
    store::create_team(&mut tx, &team, user).await?;
    tx.commit().await?;
    signed_in(&state, user, account.username).await
}

/// Sign-up: a user with no team (or owning the new team named in the body).
async fn register(
    State(state): State<AppState>,
    Body(account): Body<NewAccount>,
) -> Result<Response, AppError> {
    check_name("user", &account.username)?;
    if let Some(team) = &account.team {
        check_name("team", team)?;
    }
    check_password(&account.password)?;
    let hash = hash_password(account.password).await?;
    let mut tx = state.db.begin().await?;
    let user = store::create_user(&mut tx, &account.username, &hash)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "that username is taken"))?;
    if let Some(team) = &account.team {
        store::create_team(&mut tx, team, user)
            .await
            .map_err(|e| AppError::conflict_on_unique(e, "that team name is taken"))?;
    }
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
    let keys = vec![
        format!("user:{}", login.username.to_lowercase()),
        format!("addr:{}", peer.ip()),
    ];
    state
        .auth
        .limiter
        .check(&keys)
        .map_err(|retry_after_s| AppError::TooManyAttempts { retry_after_s })?;
    if login.password.len() > MAX_PASSWORD_BYTES {
        return Err(AppError::BadCredentials);
    }
    let found = store::user_by_name(&state.db, &login.username).await?;
    let stored = found
        .as_ref()
        .map_or(DUMMY_HASH.to_string(), |(_, _, hash)| hash.clone());
    let password = login.password;
    let matches = tokio::task::spawn_blocking(move || secrets::verify_password(&password, &stored))
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
    match found {
        Some((id, username, _)) if matches => {
            state.auth.limiter.record_success(&keys);
            signed_in(&state, id, username).await
        }
        _ => {
            state.auth.limiter.record_failure(&keys);
            Err(AppError::BadCredentials)
        }
    }
}

/// Starts a session: the cookie plus the body of `/api/me`.
async fn signed_in(state: &AppState, user: i64, username: String) -> Result<Response, AppError> {
    let (secret, csrf_token) = store::create_session(&state.db, user).await?;
    let viewer = Viewer::User {
        id: user,
        username,
        csrf_token,
    };
    let body = me_for(state, &viewer).await?;
    let cookie = format!(
        "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}",
        14 * 24 * 3600
    );
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| AppError::Internal(e.to_string()))?,
    );
    Ok(response)
}

async fn logout(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    viewer.check_csrf(&headers)?;
    if let Some(secret) = super::session_cookie(&headers) {
        store::delete_session(&state.db, secret).await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "lachesis_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0",
        ),
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

/// The signed-in user's id (teams are managed by people, not tokens).
fn user_id(viewer: &Viewer) -> Result<i64, AppError> {
    match viewer {
        Viewer::User { id, .. } => Ok(*id),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
        _ => Err(AppError::Forbidden("teams are managed by signed-in users")),
    }
}

/// The team's id when the caller holds at least `needed` in it; 404 otherwise.
async fn team_for(
    state: &AppState,
    viewer: &Viewer,
    team: &str,
    needed: Role,
) -> Result<i64, AppError> {
    let user = user_id(viewer)?;
    match store::team_role_by_name(&state.db, user, team).await? {
        Some((id, role)) if role >= needed => Ok(id),
        Some(_) => Err(AppError::Forbidden("only the team's owners may do that")),
        None => Err(AppError::NotFound("team")),
    }
}

async fn create_team(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Body(team): Body<NewTeam>,
) -> Result<Json<Membership>, AppError> {
    viewer.check_csrf(&headers)?;
    let user = user_id(&viewer)?;
    check_name("team", &team.name)?;
    let mut tx = state.db.begin().await?;
    store::create_team(&mut tx, &team.name, user)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "that team name is taken"))?;
    tx.commit().await?;
    Ok(Json(Membership {
        team: team.name,
        role: Role::Owner,
    }))
}

async fn list_members(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(team): Path<String>,
) -> Result<Json<Vec<Member>>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Viewer).await?;
    Ok(Json(store::members(&state.db, team).await?))
}

async fn put_member(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(team): Path<String>,
    Body(member): Body<Member>,
) -> Result<Json<Member>, AppError> {
    viewer.check_csrf(&headers)?;
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    let added = store::upsert_member(&state.db, team, &member.username, member.role)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "a team keeps at least one owner"))?;
    if !added {
        return Err(AppError::NotFound("user"));
    }
    Ok(Json(member))
}

async fn remove_member(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((team, username)): Path<(String, String)>,
) -> Result<StatusCode, AppError> {
    viewer.check_csrf(&headers)?;
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    let removed = store::remove_member(&state.db, team, &username)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "a team keeps at least one owner"))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound("member"))
    }
}

async fn list_tokens(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(team): Path<String>,
) -> Result<Json<Vec<TokenInfo>>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    Ok(Json(store::tokens(&state.db, team).await?))
}

async fn create_token(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(team_name): Path<String>,
    Body(new): Body<NewToken>,
) -> Result<Json<CreatedToken>, AppError> {
    viewer.check_csrf(&headers)?;
    let team = team_for(&state, &viewer, &team_name, Role::Owner).await?;
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(AppError::Invalid("token names are 1-100 characters".into()));
    }
    if let Some(run) = &new.run {
        if !valid_run_name(run) {
            return Err(AppError::Invalid("invalid run name".into()));
        }
        // A token for a run the team does not have yet creates it for the team.
        store::create_team_run(&state.db, run, team).await?;
        match store::run_owner(&state.db, run).await? {
            Some(owner) if owner.team_id == Some(team) => {}
            _ => return Err(AppError::NotFound("run")),
        }
    }
    let secret = secrets::new_api_token();
    let info = store::create_token(
        &state.db,
        team,
        name,
        new.run.as_deref(),
        new.read_only,
        user_id(&viewer).ok(),
        &secret,
    )
    .await?;
    Ok(Json(CreatedToken {
        info,
        token: secret,
    }))
}

async fn revoke_token(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((team, id)): Path<(String, i64)>,
) -> Result<StatusCode, AppError> {
    viewer.check_csrf(&headers)?;
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    if store::revoke_token(&state.db, team, id).await? {
        state.auth.forget_cached();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound("token"))
    }
}
