//! The server: shared state, the router, and the build -> port -> run seam that tests use to start
//! the real app on port 0.

pub mod error;
mod health;
mod hosted;
pub mod lifecycle;
mod root;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};

pub use error::AppError;

use crate::config::ServeConfig;
use crate::metrics::{self, Metrics};
use crate::trajectory::{self, error::ApiError, store};

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub metrics: Arc<Metrics>,
    /// Largest request body accepted, before and after gunzipping.
    pub body_limit: usize,
    /// When set, API calls must present `Authorization: Bearer <token>`.
    pub api_token: Option<Arc<str>>,
    pub static_dir: Option<PathBuf>,
    /// Gzip `/batch` answers for clients that accept it (off: see `ServeConfig::batch_gzip`).
    pub batch_gzip: bool,
    /// Runs known to exist, so most requests skip the upsert. Runs are never deleted.
    known_runs: Arc<Mutex<HashSet<String>>>,
    /// The embedded model, when one is loaded.
    pub engine: Option<lachesis_inference::Engine>,
    /// LoRA adapters served beside it, and what loading weights may use (`crate::weights`).
    pub weights: Arc<crate::weights::Weights>,
    /// Evaluations this instance may run at once (`crate::evaluations`).
    pub evaluation_slots: Arc<tokio::sync::Semaphore>,
    /// This instance's live subscriptions (`GET /ws`); events arrive through `live::Bridge`.
    pub live: crate::live::Hub,
    pub auth: Arc<crate::auth::AuthSettings>,
    /// Runs touched since the last status sample (`dashboard::sampler`).
    pub activity: Arc<crate::dashboard::Activity>,
    /// Who judges chess games and whether ratings count.
    pub chess: Arc<crate::chess::ChessSettings>,
    /// The USDC ledger; in a served process its holds carry this process's owner key.
    pub ledger: crate::ledger::Ledger,
    /// How payments settle: in the ledger alone, or on chain (`--settlement chain`).
    pub settler: crate::settlement::Settler,
    /// What one caller may ask of the embedded model, and the per-caller accounting of it.
    pub inference_limits: Arc<crate::inference::limits::InferenceLimits>,
    /// Registration, sessions and token lifetimes.
    pub accounts: Arc<crate::auth::policy::AccountPolicy>,
    /// Limits on what one caller may ask, and the secrets key (`crate::hosting`).
    pub hosting: Arc<crate::hosting::Hosting>,
    /// The arena's settings, per-voter accounting and fitted leaderboards.
    pub arena: Arc<crate::arena::ArenaState>,
    /// Open WebSockets per client address.
    pub ws_slots: Arc<crate::hosting::slots::AddressSlots>,
    /// Whether SIGTERM arrived, and the requests in flight (see `lifecycle`).
    pub drain: Arc<lifecycle::Drain>,
    /// `/health/ready`'s last look at Postgres, shared by every caller.
    pub(crate) db_probe: Arc<health::DbProbe>,
    /// How long to wait for Postgres, for readiness and for a shutdown.
    pub lifecycle: lifecycle::Lifecycle,
    /// The supervised background tasks, for `/api/system/tasks` and `/metrics`.
    pub tasks: crate::supervisor::Supervisor,
}

impl AppState {
    pub fn new(db: PgPool, config: &ServeConfig) -> Self {
        Self {
            ledger: crate::ledger::Ledger::new(db.clone()),
            settler: crate::settlement::Settler::Simulated,
            inference_limits: Arc::new(config.inference_limits.for_new_server(config.auth)),
            accounts: Arc::new(config.accounts.clone()),
            hosting: Arc::new(config.hosting.clone()),
            arena: Arc::new(crate::arena::ArenaState::new(config.arena.clone())),
            ws_slots: Arc::new(crate::hosting::slots::AddressSlots::new(
                config.hosting.ws_per_address,
            )),
            drain: Arc::default(),
            db_probe: Arc::default(),
            lifecycle: config.lifecycle,
            tasks: crate::supervisor::Supervisor::new(config.restart_backoff),
            db,
            metrics: Arc::new(Metrics::default()),
            body_limit: config.body_limit_bytes,
            api_token: config.api_token.as_deref().map(Arc::from),
            static_dir: config.static_dir.clone(),
            batch_gzip: config.batch_gzip,
            known_runs: Arc::new(Mutex::new(HashSet::from([
                trajectory::DEFAULT_RUN.to_string()
            ]))),
            engine: None,
            weights: Arc::new(crate::weights::Weights::new(
                None,
                lachesis_inference::EngineOptions::default(),
                &config.inference_limits,
            )),
            evaluation_slots: Arc::new(tokio::sync::Semaphore::new(
                config.hosting.evaluations_at_once,
            )),
            live: crate::live::Hub::new(),
            activity: Arc::default(),
            chess: Arc::new(crate::chess::ChessSettings {
                judge: crate::chess::ChessJudge::Engine,
                stockfish: None,
                uses_ratings: config.chess_uses_ratings,
                searches: Arc::new(tokio::sync::Semaphore::new(config.hosting.chess_searches)),
                reviews: Arc::new(crate::chess::lanes::ReviewLanes::new(
                    config.hosting.chess_reviews_per_owner,
                )),
            }),
            auth: Arc::new(crate::auth::AuthSettings::new(
                config.auth,
                config.api_token.as_deref().map(Arc::from),
            )),
        }
    }

    pub async fn ensure_run(&self, run: &str) -> Result<(), ApiError> {
        let known = self
            .known_runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(run);
        if !known {
            store::ensure_run(&self.db, run).await?;
            self.known_runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(run.to_string());
        }
        Ok(())
    }
}

pub fn router(state: AppState) -> Router {
    // With accounts on, the trajectory routes check each caller against the run they address
    // (`trajectory::RunId`); the model serves any authenticated caller; `/metrics` names every
    // run, so only the admin token reads it.
    let inference = crate::inference::routes().route_layer(middleware::from_fn_with_state(
        state.clone(),
        require_caller,
    ));
    // New weights read the server's disk and cost a model's memory: the admin's alone.
    let weights = crate::weights::routes()
        .route_layer(middleware::from_fn_with_state(state.clone(), require_admin));
    let prometheus = Router::new()
        .route("/metrics", get(metrics::handler))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_admin));
    let api = Router::new()
        .merge(trajectory::routes())
        .nest("/runs/{run}", trajectory::routes())
        .merge(inference)
        .merge(weights)
        .merge(prometheus)
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ));
    // Atropos compresses responses of 1000 bytes and more; batches decide for themselves.
    let compress_when = SizeAbove::new(1000)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::IMAGES)
        .and(UnlessMarked);
    let compression = CompressionLayer::new()
        .quality(CompressionLevel::Fastest)
        .compress_when(compress_when);
    Router::new()
        .route("/", get(root::root))
        .merge(health::routes())
        // Outside the token layer: the socket's `Viewer` extractor authenticates.
        .route("/ws", get(crate::live::socket::handler))
        .merge(api)
        .merge(crate::auth::routes::routes())
        .merge(crate::dashboard::routes())
        .merge(crate::chess::routes::routes())
        .merge(crate::spatial::routes())
        .merge(crate::marketplace::routes::routes())
        .merge(crate::marketplace::feed::routes())
        .merge(crate::cats::routes())
        .merge(crate::arena::routes::routes())
        .merge(crate::feedback::routes())
        .merge(crate::ledger::routes::routes())
        .merge(crate::supervisor::routes::routes())
        .merge(crate::mcp_server::routes(&state))
        .fallback(root::static_file)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::hosting::scope::guard,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::hosting::deadline,
        ))
        .layer(compression)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            lifecycle::track,
        ))
        // Outermost: a page's request to a loopback server is refused before anything else runs.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::hosting::loopback::guard,
        ))
        .with_state(state)
}

/// Marks a response the compression layer must leave alone (an extension: never sent).
#[derive(Clone, Copy)]
pub struct SkipCompression;

#[derive(Clone, Copy)]
struct UnlessMarked;

impl Predicate for UnlessMarked {
    fn should_compress<B: axum::body::HttpBody>(&self, response: &axum::http::Response<B>) -> bool {
        response.extensions().get::<SkipCompression>().is_none()
    }
}

/// With accounts off, the optional single `--api-token` guards the API (the pre-accounts mode).
async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if state.auth.enabled {
        return next.run(req).await;
    }
    if let Some(expected) = &state.api_token {
        let presented = req
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !presented.is_some_and(|token| constant_time_eq(token.as_bytes(), expected.as_bytes())) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(req).await
}

use crate::auth::secrets::constant_time_eq;

/// The model's callers (anyone, with accounts off): the admin token or a token with the inference
/// scope. A plain team token is for posting rollouts, and a free account is not a compute grant:
/// letting either spend the server's model would hand it to whoever signs up.
async fn require_caller(State(state): State<AppState>, req: Request, next: Next) -> Response {
    use crate::auth::Viewer;
    match crate::auth::identify(req.headers(), &state).await {
        Ok(Viewer::Anonymous) => ApiError::Unauthorized.into_response(),
        Ok(Viewer::Token {
            inference: false, ..
        }) => AppError::Forbidden(
            "this API token may not call the model: create one with the inference scope",
        )
        .into_response(),
        Ok(Viewer::User { .. }) => AppError::Forbidden(
            "the model is called with an API token that has the inference scope, not a session",
        )
        .into_response(),
        Ok(_) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The admin token (or anyone, with accounts off).
async fn require_admin(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match crate::auth::identify(req.headers(), &state).await {
        Ok(viewer) if viewer.is_full_rights() => next.run(req).await,
        Ok(_) => ApiError::Unauthorized.into_response(),
        Err(e) => e.into_response(),
    }
}

/// A bound, migrated server that has not started serving yet.
pub struct Server {
    listener: TcpListener,
    router: Router,
    pub state: AppState,
    envs: Vec<crate::envs::in_process::EnvSpec>,
    api_token: Option<String>,
    live_bridge: crate::live::Bridge,
}

impl Server {
    /// Connects to Postgres, runs migrations and binds the listener (port 0 picks a free port).
    pub async fn build(config: &ServeConfig) -> anyhow::Result<Self> {
        let db = crate::db::connect_with(
            &config.database_url,
            config.db_max_connections,
            config.lifecycle.db_acquire_timeout,
        )
        .await?;
        // Migrations take sqlx's own advisory lock; what follows, up to recovery, takes ours, so
        // instances started together seed and recover one after another.
        crate::db::migrate(&db).await?;
        // A crash may have left payments between hold and capture: nothing was charged for them
        // yet, so they are released before anything can pay again.
        let ledger = crate::ledger::Ledger::with_owner(db.clone()).await?;
        let startup = crate::db::StartupLock::take(&db).await?;
        crate::marketplace::cards::seed(&db).await?;
        crate::marketplace::operator::apply(&db, &config.judge_cards).await?;
        let recovery = ledger.recover().await?;
        startup.release().await;
        // Chain payments of a previous run are settled from the chain: captured if their transfer
        // ran, released if it never can, and otherwise retried in the background below.
        let settler = crate::settlement::Settler::from_args(&config.settlement).await?;
        if !recovery.awaiting_chain.is_empty()
            && let crate::settlement::Settler::Chain(chain) = &settler
        {
            let holds: Vec<i64> = recovery.awaiting_chain.iter().map(|hold| hold.id).collect();
            let resolved = chain.resolve_holds(&ledger, &holds).await?;
            tracing::info!(
                captured = resolved.captured,
                released = resolved.released,
                pending = resolved.pending.len(),
                "chain holds of a previous run settled from the chain"
            );
        }
        settler.spawn_recovery(ledger.clone(), std::time::Duration::from_secs(15));
        if recovery.released > 0 || !recovery.awaiting_chain.is_empty() {
            tracing::info!(
                released = recovery.released,
                awaiting_chain = recovery.awaiting_chain.len(),
                "ledger holds left open by a previous run resolved"
            );
        }
        let listener = TcpListener::bind((config.host.as_str(), config.port))
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot listen on {}:{}: {e}", config.host, config.port)
            })?;
        let mut state = AppState::new(db, config);
        state.ledger = ledger;
        state.settler = settler;
        // Listening before serving: an event published once `build` returns is delivered.
        let live_bridge = crate::live::Bridge::listen(&state.db, state.live.clone()).await?;
        if config.auth && config.api_token.is_none() && !config.envs.is_empty() {
            // In-process workers need a credential when accounts are on: a secret made for this
            // process alone, never shown.
            state.auth = Arc::new(crate::auth::AuthSettings::new(
                true,
                Some(Arc::from(crate::auth::secrets::new_api_token())),
            ));
        }
        if let Some(path) = config.model.clone() {
            let shown = path.display().to_string();
            let options = lachesis_inference::EngineOptions {
                restart_backoff: config.restart_backoff,
                ..config.inference_limits.engine_options()
            };
            let weights = crate::weights::Weights::new(
                Some(path.clone()),
                options.clone(),
                &config.inference_limits,
            );
            let engine = tokio::task::spawn_blocking(move || {
                lachesis_inference::Engine::load(&path, options)
            })
            .await??;
            state.weights = Arc::new(weights);
            tracing::info!(model = %shown, name = %engine.info().name, "embedded model loaded");
            state.tasks.watch_engine(&engine);
            state.engine = Some(engine);
        }
        if let Some(oracle) = config.stockfish.clone() {
            let pool = oracle.start().await;
            state.chess = Arc::new(crate::chess::ChessSettings {
                stockfish: pool,
                ..(*state.chess).clone()
            });
        }
        if config.chess_judge == crate::config::ChessJudgeMode::Embedded {
            let engine = state.engine.clone().ok_or_else(|| {
                anyhow::anyhow!("--chess-judge embedded needs the embedded model (--model)")
            })?;
            state.chess = Arc::new(crate::chess::ChessSettings {
                judge: crate::chess::ChessJudge::Llm(Arc::new(crate::policy::EmbeddedPolicy::new(
                    engine,
                ))),
                ..(*state.chess).clone()
            });
        }
        // Games a previous run ended and did not finish reviewing, judged as this one's would be.
        let resumed = crate::chess::resume_reviews(&state)
            .await
            .map_err(|e| anyhow::anyhow!("resuming chess reviews: {e}"))?;
        if resumed > 0 {
            tracing::info!(games = resumed, "chess reviews of a previous run resumed");
        }
        Ok(Self {
            live_bridge,
            listener,
            router: router(state.clone()),
            envs: config.envs.clone(),
            api_token: state.auth.admin_token.as_deref().map(str::to_owned),
            state,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves (and runs the in-process environments) until `shutdown` resolves, then drains: see
    /// [`lifecycle`].
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let (stop_envs, envs_stopped) = tokio::sync::watch::channel(false);
        let envs = hosted::spawn(
            &self.envs,
            &format!("http://{}", self.local_addr()),
            self.api_token.clone(),
            &self.state,
            &envs_stopped,
        )?;
        let service = self
            .router
            .into_make_service_with_connect_info::<SocketAddr>();
        let live = self.state.live.clone();
        let bridge = self
            .live_bridge
            .spawn(&self.state.tasks, envs_stopped.clone());
        let sampler = crate::dashboard::sampler::spawn(
            &self.state.tasks,
            self.state.db.clone(),
            self.state.activity.clone(),
            envs_stopped.clone(),
        );
        let review_sweep = crate::chess::spawn_sweep(
            &self.state,
            self.state.hosting.chess_review_sweep,
            envs_stopped.clone(),
        );
        let people_items_sweep = crate::marketplace::abandoned::spawn_sweep(
            &self.state,
            self.state.hosting.people_items_sweep,
            envs_stopped.clone(),
        );
        // A lost owner lock (its connection cut) is noticed and taken again within seconds.
        let owner_watch = self
            .state
            .ledger
            .watch_owner(std::time::Duration::from_secs(5));
        // Everything below fits in `--shutdown-timeout-s` from the signal on.
        let deadline =
            lifecycle::serve_until_drained(self.listener, service, &self.state, shutdown, || {
                let _ = stop_envs.send(true);
                live.shutdown();
            })
            .await?;
        // A runner stops at its next check, once the rounds it cut off are recorded (a paid round
        // finishes); one stuck longer, in a long generation or a slow judge, is cut off at the
        // tasks' deadline of `--shutdown-timeout-s`.
        for env in envs {
            let abort = env.abort_handle();
            if tokio::time::timeout_at(deadline.tasks, env).await.is_err() {
                abort.abort();
            }
        }
        // The bridge holds a pooled connection: it stops before the pool closes.
        let _ = tokio::time::timeout_at(deadline.tasks, bridge).await;
        let _ = tokio::time::timeout_at(deadline.tasks, sampler).await;
        let _ = tokio::time::timeout_at(deadline.tasks, review_sweep).await;
        let _ = tokio::time::timeout_at(deadline.tasks, people_items_sweep).await;
        // After the sweep, which would otherwise start reviews again with the claims given back.
        match tokio::time::timeout_at(deadline.end, crate::chess::release_claims(&self.state)).await
        {
            Ok(Ok(0)) => {}
            Ok(Ok(games)) => tracing::info!(games, "chess reviews cut off by the stop given back"),
            Ok(Err(e)) => tracing::warn!(error = %e, "giving back chess review claims"),
            Err(_) => tracing::warn!("giving back chess review claims ran out of time"),
        }
        if let Some(watch) = owner_watch {
            watch.abort();
        }
        lifecycle::release_holds(&self.state.ledger, deadline.end).await;
        lifecycle::close_pool(&self.state.db, deadline.end).await;
        Ok(())
    }
}
