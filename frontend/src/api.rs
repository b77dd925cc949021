//! The typed HTTP client: one function per backend route the pages use.
//!
//! Two pieces of state live here rather than in every caller, because every request needs them:
//! the CSRF token (sent as `X-CSRF-Token` on each mutation, since the session cookie alone must
//! not be enough to change anything) and what to do on HTTP 401 (the app installs a hook that
//! sends the visitor to `/login`). The browser is single-threaded, so thread-locals are the
//! natural home.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use gloo_net::http::{Request, RequestBuilder, Response};
use lachesis_shared::accounts::{
    AuthState, CreatedInvite, CreatedToken, Login, Me, Member, Membership, NewAccount, NewTeam,
    NewToken, TokenInfo, Visibility,
};
use lachesis_shared::error::ErrorBody;
use lachesis_shared::runs::{GroupDetail, RunMetrics, RunSummary};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

thread_local! {
    static CSRF: RefCell<Option<String>> = const { RefCell::new(None) };
    static ON_UNAUTHORIZED: RefCell<Option<Rc<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Remembers the CSRF token of the signed-in session (from [`Me`]); `None` after sign-out.
pub fn set_csrf(token: Option<String>) {
    CSRF.with(|c| *c.borrow_mut() = token);
}

/// What to run when the backend answers 401: the app navigates to the sign-in page.
pub fn on_unauthorized(hook: impl Fn() + 'static) {
    ON_UNAUTHORIZED.with(|h| *h.borrow_mut() = Some(Rc::new(hook)));
}

/// Why a request failed, phrased for a person.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// 401: not signed in (the hook has already been told).
    Unauthorized(String),
    /// Any other non-2xx answer, with the server's `detail`.
    Status { status: u16, message: String },
    /// The request did not reach the server or the answer could not be read.
    Network(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Unauthorized(message) => write!(f, "{message}"),
            ApiError::Status { status, message } => write!(f, "{message} (HTTP {status})"),
            ApiError::Network(message) => write!(f, "{message}"),
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The built-in environments listed by `GET /api/environments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub name: String,
    pub description: String,
}

/// Percent-encodes one path segment or query value (run and team names are user-chosen).
pub fn encode(part: &str) -> String {
    String::from(js_sys::encode_uri_component(part))
}

pub(crate) fn with_csrf(builder: RequestBuilder) -> RequestBuilder {
    match CSRF.with(|c| c.borrow().clone()) {
        Some(token) => builder.header("X-CSRF-Token", &token),
        None => builder,
    }
}

/// Sends and turns every non-2xx answer into an [`ApiError`] carrying the server's message.
pub(crate) async fn send(request: Request, what: &str) -> ApiResult<Response> {
    send_with(request, what, true).await
}

/// [`send`], telling the 401 hook only when `redirect` is set.
async fn send_with(request: Request, what: &str, redirect: bool) -> ApiResult<Response> {
    let response = request
        .send()
        .await
        .map_err(|e| ApiError::Network(format!("{what}: the server cannot be reached ({e})")))?;
    if response.ok() {
        return Ok(response);
    }
    let status = response.status();
    let message = match response.json::<ErrorBody>().await {
        Ok(body) => body.summary(),
        Err(_) => format!("{what} failed: {}", response.status_text()),
    };
    if status == 401 && redirect {
        let hook = ON_UNAUTHORIZED.with(|h| h.borrow().clone());
        if let Some(hook) = hook {
            hook();
        }
    }
    if status == 401 {
        return Err(ApiError::Unauthorized(message));
    }
    Err(ApiError::Status { status, message })
}

pub(crate) async fn decode<T: DeserializeOwned>(response: Response, what: &str) -> ApiResult<T> {
    response
        .json::<T>()
        .await
        .map_err(|e| ApiError::Network(format!("{what}: unexpected answer ({e})")))
}

pub(crate) async fn get<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    get_with(path, true).await
}

async fn get_with<T: DeserializeOwned>(path: &str, redirect: bool) -> ApiResult<T> {
    let request = Request::get(path)
        .header("Accept", "application/json")
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    decode(send_with(request, path, redirect).await?, path).await
}

fn json_request<B: Serialize>(builder: RequestBuilder, body: &B) -> ApiResult<Request> {
    with_csrf(builder)
        .header("Accept", "application/json")
        .json(body)
        .map_err(|e| ApiError::Network(e.to_string()))
}

pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(path: &str, body: &B) -> ApiResult<T> {
    let request = json_request(Request::post(path), body)?;
    decode(send(request, path).await?, path).await
}

/// A mutation whose answer body does not matter (204s, or a body we do not need).
async fn mutate_empty(builder: RequestBuilder, path: &str) -> ApiResult<()> {
    let request = with_csrf(builder)
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    send(request, path).await.map(|_| ())
}

// --- accounts -------------------------------------------------------------------------------

pub async fn auth_state() -> ApiResult<AuthState> {
    get("/api/auth/state").await
}

/// Quiet about 401: a visitor who is not signed in may still read public runs.
pub async fn me() -> ApiResult<Me> {
    get_with("/api/me", false).await
}

pub async fn setup(account: &NewAccount) -> ApiResult<Me> {
    post("/api/auth/setup", account).await
}

pub async fn register(account: &NewAccount) -> ApiResult<Me> {
    post("/api/auth/register", account).await
}

pub async fn login(login: &Login) -> ApiResult<Me> {
    post("/api/auth/login", login).await
}

pub async fn logout() -> ApiResult<()> {
    mutate_empty(Request::post("/api/auth/logout"), "/api/auth/logout").await
}

pub async fn create_team(team: &NewTeam) -> ApiResult<Membership> {
    post("/api/teams", team).await
}

/// A single-use sign-up code for the team (owners only), shown once.
pub async fn create_invite(team: &str) -> ApiResult<CreatedInvite> {
    let path = format!("/api/teams/{}/invites", encode(team));
    let request = with_csrf(Request::post(&path))
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    decode(send(request, &path).await?, &path).await
}

pub async fn members(team: &str) -> ApiResult<Vec<Member>> {
    get(&format!("/api/teams/{}/members", encode(team))).await
}

pub async fn set_member(team: &str, member: &Member) -> ApiResult<Member> {
    post(&format!("/api/teams/{}/members", encode(team)), member).await
}

pub async fn remove_member(team: &str, username: &str) -> ApiResult<()> {
    let path = format!("/api/teams/{}/members/{}", encode(team), encode(username));
    mutate_empty(Request::delete(&path), &path).await
}

pub async fn tokens(team: &str) -> ApiResult<Vec<TokenInfo>> {
    get(&format!("/api/teams/{}/tokens", encode(team))).await
}

pub async fn create_token(team: &str, token: &NewToken) -> ApiResult<CreatedToken> {
    post(&format!("/api/teams/{}/tokens", encode(team)), token).await
}

pub async fn revoke_token(team: &str, id: i64) -> ApiResult<()> {
    let path = format!("/api/teams/{}/tokens/{id}", encode(team));
    mutate_empty(Request::delete(&path), &path).await
}

// --- runs -----------------------------------------------------------------------------------

pub async fn runs() -> ApiResult<Vec<RunSummary>> {
    get("/api/runs").await
}

pub async fn run(run: &str) -> ApiResult<RunSummary> {
    get(&format!("/api/runs/{}", encode(run))).await
}

pub async fn metrics(run: &str, limit: usize) -> ApiResult<RunMetrics> {
    get(&format!("/api/runs/{}/metrics?limit={limit}", encode(run))).await
}

pub async fn groups(run: &str, limit: usize, env: Option<i64>) -> ApiResult<Vec<GroupDetail>> {
    let env = env.map(|id| format!("&env={id}")).unwrap_or_default();
    get(&format!(
        "/api/runs/{}/groups?limit={limit}{env}",
        encode(run)
    ))
    .await
}

pub async fn set_visibility(run: &str, public: bool) -> ApiResult<()> {
    put_visibility(&format!("/api/runs/{}/visibility", encode(run)), public).await
}

/// `PUT {path}` with `{"public": ...}`: a run's or a chess game's visibility.
pub async fn put_visibility(path: &str, public: bool) -> ApiResult<()> {
    let request = json_request(Request::put(path), &Visibility { public })?;
    send(request, path).await.map(|_| ())
}

/// Plain links (the browser downloads them with the session cookie).
pub fn export_url(run: &str, file: &str) -> String {
    format!("/api/runs/{}/export/{file}", encode(run))
}

pub async fn environments() -> ApiResult<Vec<Environment>> {
    get("/api/environments").await
}

/// Quiet about 401: the runs page is open to visitors who may not read the server's tasks.
pub async fn system_tasks() -> ApiResult<Vec<lachesis_shared::system::TaskStatus>> {
    get_with("/api/system/tasks", false).await
}

// --- spatial ----------------------------------------------------------------------------------

pub async fn spatial_task(difficulty: u8, seed: u64) -> ApiResult<lachesis_shared::spatial::Task> {
    get(&format!("/api/spatial/tasks/{difficulty}/{seed}")).await
}

pub async fn spatial_attempt(
    attempt: &lachesis_shared::spatial::HumanAttempt,
) -> ApiResult<lachesis_shared::spatial::AttemptResult> {
    post("/api/spatial/attempts", attempt).await
}

/// The scene's latest state; `Ok(None)` while nothing has been shown on it yet.
pub async fn spatial_scene(
    scene: &str,
) -> ApiResult<Option<lachesis_shared::spatial::SceneSnapshot>> {
    match get(&format!("/api/spatial/scenes/{}", encode(scene))).await {
        Ok(snapshot) => Ok(Some(snapshot)),
        Err(ApiError::Status { status: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

// --- arena ------------------------------------------------------------------------------------
//
// Reading the arena (the leaderboard, finished battles) is open to anyone. Battles and votes
// belong to a voter: the signed-in session, or for a visitor the token from
// `POST /api/arena/visitors`, kept in localStorage and sent as `X-Arena-Visitor`. These requests
// never send a visitor to the sign-in page on 401: a stale token is replaced once instead.

use lachesis_shared::arena::{
    ArenaKind, BattleView, ContenderView, LeaderboardView, NewBattle, NewVote, VisitorToken,
};

/// Where the visitor token is kept between visits.
const ARENA_VISITOR_KEY: &str = "lachesis.arena.visitor";

/// `window.localStorage`, through `Reflect` (web-sys' `Storage` feature is not enabled); `None`
/// when the browser refuses it (private modes may).
fn local_storage() -> Option<wasm_bindgen::JsValue> {
    let storage = js_sys::Reflect::get(&js_sys::global(), &"localStorage".into()).ok()?;
    (!storage.is_undefined() && !storage.is_null()).then_some(storage)
}

/// Calls `localStorage.<method>(args…)`; `None` when storage or the call fails.
fn storage_call(method: &str, args: &[&str]) -> Option<wasm_bindgen::JsValue> {
    use wasm_bindgen::JsCast;
    let storage = local_storage()?;
    let function: js_sys::Function = js_sys::Reflect::get(&storage, &method.into())
        .ok()?
        .dyn_into()
        .ok()?;
    let args: js_sys::Array = args
        .iter()
        .map(|a| wasm_bindgen::JsValue::from_str(a))
        .collect();
    function.apply(&storage, &args).ok()
}

/// The stored visitor token, if any.
pub fn arena_visitor() -> Option<String> {
    storage_call("getItem", &[ARENA_VISITOR_KEY])?.as_string()
}

fn store_arena_visitor(token: Option<&str>) {
    match token {
        Some(token) => storage_call("setItem", &[ARENA_VISITOR_KEY, token]),
        None => storage_call("removeItem", &[ARENA_VISITOR_KEY]),
    };
}

/// A fresh visitor token from the server, stored for the next visit.
async fn new_arena_visitor() -> ApiResult<String> {
    let path = "/api/arena/visitors";
    let request = with_csrf(Request::post(path))
        .header("Accept", "application/json")
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    let VisitorToken { token } = decode(send_with(request, path, false).await?, path).await?;
    store_arena_visitor(Some(&token));
    Ok(token)
}

fn with_visitor(builder: RequestBuilder, token: Option<&str>) -> RequestBuilder {
    match token {
        Some(token) => builder.header("X-Arena-Visitor", token),
        None => builder,
    }
}

/// Sends the request `make` builds for a visitor token (or none), as the voter: with the stored
/// token, first getting one when there is none and `need_token` (nobody is signed in); on 401,
/// once more with a fresh token.
async fn as_arena_voter<T: DeserializeOwned>(
    path: &str,
    need_token: bool,
    make: impl Fn(Option<&str>) -> ApiResult<Request>,
) -> ApiResult<T> {
    let mut token = arena_visitor();
    if token.is_none() && need_token {
        token = Some(new_arena_visitor().await?);
    }
    match send_with(make(token.as_deref())?, path, false).await {
        Ok(response) => decode(response, path).await,
        Err(ApiError::Unauthorized(_)) => {
            store_arena_visitor(None);
            let fresh = new_arena_visitor().await?;
            decode(send_with(make(Some(&fresh))?, path, false).await?, path).await
        }
        Err(e) => Err(e),
    }
}

/// Deals a new battle (its answers are still being written).
pub async fn arena_new_battle(arena: ArenaKind, need_token: bool) -> ApiResult<BattleView> {
    let path = "/api/arena/battles";
    as_arena_voter(path, need_token, |token| {
        json_request(
            with_visitor(Request::post(path), token),
            &NewBattle { arena },
        )
    })
    .await
}

/// One battle: the voter's own as it stands, or anyone's once it is voted or void.
pub async fn arena_battle(id: i64) -> ApiResult<BattleView> {
    let path = format!("/api/arena/battles/{id}");
    as_arena_voter(&path, false, |token| {
        with_visitor(Request::get(&path), token)
            .header("Accept", "application/json")
            .build()
            .map_err(|e| ApiError::Network(e.to_string()))
    })
    .await
}

/// Votes on the voter's battle; the answer reveals both contenders.
pub async fn arena_vote(id: i64, vote: &NewVote) -> ApiResult<BattleView> {
    let path = format!("/api/arena/battles/{id}/vote");
    as_arena_voter(&path, false, |token| {
        json_request(with_visitor(Request::post(&path), token), vote)
    })
    .await
}

/// The newest voted or void battles, newest first.
pub async fn arena_battles(arena: ArenaKind, limit: usize) -> ApiResult<Vec<BattleView>> {
    let path = format!("/api/arena/battles?arena={}&limit={limit}", arena.as_str());
    get_with(&path, false).await
}

pub async fn arena_leaderboard(
    arena: ArenaKind,
    style_control: bool,
) -> ApiResult<LeaderboardView> {
    let style = if style_control {
        "&style_control=true"
    } else {
        ""
    };
    let path = format!("/api/arena/leaderboard?arena={}{style}", arena.as_str());
    get_with(&path, false).await
}

pub async fn arena_contenders() -> ApiResult<Vec<ContenderView>> {
    get_with("/api/arena/contenders", false).await
}

/// The public export of every vote, one battle per line (a plain download link).
pub fn arena_export_url(arena: ArenaKind) -> String {
    format!("/api/arena/battles.jsonl?arena={}", arena.as_str())
}

// --- feedback ---------------------------------------------------------------------------------
//
// Queues of items that signed-in people judge (rank, rate or compare answers). A queue belongs to
// a team; its members see and judge it.

use lachesis_shared::feedback::{
    AgreementReport, ItemToJudge, NewItems, NewJudgement, NewQueue, QueueView,
};

/// [`get`], with `Ok(None)` for an answer of 204 No Content.
async fn get_or_none<T: DeserializeOwned>(path: &str) -> ApiResult<Option<T>> {
    let request = Request::get(path)
        .header("Accept", "application/json")
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    let response = send(request, path).await?;
    if response.status() == 204 {
        return Ok(None);
    }
    decode(response, path).await.map(Some)
}

/// The queues of the caller's teams.
pub async fn feedback_queues() -> ApiResult<Vec<QueueView>> {
    get("/api/feedback/queues").await
}

/// What the signed-in person has been paid for their verdicts on human judge cards.
pub async fn feedback_earnings() -> ApiResult<lachesis_shared::feedback::Earnings> {
    get("/api/feedback/earnings").await
}

/// Opens a queue for `team` (its owners and members may).
pub async fn feedback_open_queue(team: &str, queue: &NewQueue) -> ApiResult<QueueView> {
    #[derive(Serialize)]
    struct Body<'a> {
        team: &'a str,
        #[serde(flatten)]
        queue: &'a NewQueue,
    }
    post("/api/feedback/queues", &Body { team, queue }).await
}

/// Adds items to a queue; the answer is how many were added.
pub async fn feedback_add_items(queue: i64, items: &NewItems) -> ApiResult<u64> {
    #[derive(Deserialize)]
    struct Added {
        added: u64,
    }
    let Added { added } = post(&format!("/api/feedback/queues/{queue}/items"), items).await?;
    Ok(added)
}

/// The caller's next item in the queue; `Ok(None)` when nothing is left for them.
pub async fn feedback_next(queue: i64) -> ApiResult<Option<ItemToJudge>> {
    get_or_none(&format!("/api/feedback/queues/{queue}/next")).await
}

/// Records the caller's judgement of an item (409 if they already judged it).
pub async fn feedback_judge(item: i64, judgement: &NewJudgement) -> ApiResult<()> {
    let path = format!("/api/feedback/items/{item}/judgements");
    let request = json_request(Request::post(&path), judgement)?;
    send(request, &path).await.map(|_| ())
}

/// How far the queue's annotators agree.
pub async fn feedback_agreement(queue: i64) -> ApiResult<AgreementReport> {
    get(&format!("/api/feedback/queues/{queue}/agreement")).await
}

/// A queue's export, `pairs.jsonl` or `ratings.jsonl` (a plain download link).
pub fn feedback_export_url(queue: i64, file: &str) -> String {
    format!("/api/feedback/queues/{queue}/{file}")
}
