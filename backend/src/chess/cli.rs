//! `lachesis chess ...`: self-play learning, the Elo yardstick against Stockfish, and the
//! move-latency benchmark; no server needed (`rate --record` stores its result in Postgres).

use std::time::Instant;

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use lachesis_chess::agent::{self, PolicyParams};
use lachesis_chess::rating::{self, EloEstimate, Record, Schedule};
use lachesis_chess::selfplay::{self, SelfPlayConfig};
use lachesis_chess::shakmaty::{Chess, Position};
use lachesis_chess::stockfish::{self, EngineConfig, EnginePool, SearchLimit, Strength};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::ratings::NewRating;
use super::store::StoreError;

#[derive(Subcommand)]
pub enum ChessCommand {
    /// The agent plays a fixed baseline (its version 0), learns from the judged games, and
    /// prints per policy version its sacrifice rate, how many sacrifices were sound, judged
    /// aggression and results.
    Selfplay(SelfPlayArgs),
    /// The agent plays a ladder of fixed opponents anchored at Stockfish's UCI_Elo 1350, whose
    /// rungs are calibrated by games between neighbours; prints every rung's Elo, the agent's
    /// with a 95% interval, and its sacrifice rate in those games.
    Rate(RateArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SelfPlayJudge {
    /// Stockfish decides soundness; each likely move of the agent's is judged, and the agent
    /// learns from all of them (the expected policy gradient).
    Stockfish,
    /// The shallow search alone (material offered against what a depth-2 search says it costs).
    Search,
}

#[derive(Args)]
pub struct SelfPlayArgs {
    #[arg(long, default_value_t = 50)]
    pub games: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "stockfish")]
    pub judge: SelfPlayJudge,
    /// Games each policy version plays before it learns from them.
    #[arg(long, default_value_t = 10)]
    pub games_per_version: usize,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Write the last version's parameters here (JSON), for `lachesis chess rate --policy`.
    #[arg(long)]
    pub save_policy: Option<PathBuf>,
}

#[derive(Args)]
pub struct EngineArgs {
    /// The Stockfish binary (default: Debian's /usr/games/stockfish or `stockfish` on PATH).
    #[arg(long, env = "LACHESIS_STOCKFISH")]
    pub stockfish: Option<PathBuf>,
    /// Plies Stockfish searches per judged position.
    #[arg(long, default_value_t = 8)]
    pub stockfish_depth: u32,
}

impl EngineArgs {
    fn path(&self) -> anyhow::Result<PathBuf> {
        self.stockfish
            .clone()
            .or_else(stockfish::locate)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no Stockfish found: apt-get install stockfish, or pass --stockfish PATH"
                )
            })
    }
}

#[derive(Args)]
pub struct RateArgs {
    /// Games the agent plays against each rung of the ladder, half with each colour.
    #[arg(long, default_value_t = 10)]
    pub games: usize,
    /// Calibration games between each pair of neighbouring rungs, half with each colour.
    #[arg(long, default_value_t = 10)]
    pub calibration_games: usize,
    /// The most games --games or --calibration-games may ask for per pairing (a typo such as
    /// 2000 would otherwise play for days).
    #[arg(long, default_value_t = 200)]
    pub max_games: usize,
    /// Stockfish's thinking time per move, in milliseconds (1 to 1000): part of the anchor's
    /// definition, so ratings measured at different times do not compare.
    #[arg(long, default_value_t = 50)]
    pub movetime_ms: u64,
    /// Policy parameters (JSON, as `selfplay --save-policy` writes them). Without it: the newest
    /// stored policy when DATABASE_URL is set, else version 0.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, env = "LACHESIS_STOCKFISH")]
    pub stockfish: Option<PathBuf>,
    /// Store the result in the database, where `GET /api/chess/agent` and the chess page show
    /// it. The policy must be a stored version (with --policy, the file must match it).
    #[arg(long)]
    pub record: bool,
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
}

/// The longest --movetime-ms.
const MAX_MOVETIME_MS: u64 = 1_000;

/// Why `lachesis chess rate` refuses to start, or to record.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RateError {
    #[error("--{flag} {asked} is more than --max-games {max}")]
    TooManyGames {
        flag: &'static str,
        asked: usize,
        max: usize,
    },
    #[error("--games must be at least 1: the agent is rated from its own games")]
    NoAgentGames,
    #[error("--movetime-ms must be 1 to {MAX_MOVETIME_MS}, not {0}")]
    MoveTime(u64),
    #[error("--record needs DATABASE_URL (or --database-url)")]
    RecordNeedsDatabase,
    #[error("--record: the policy file's version {0} is not the stored version {0}")]
    PolicyNotStored(i64),
    #[error("the games leave the agent's Elo open on both sides; nothing recorded")]
    Unrated,
}

impl RateArgs {
    /// The flags' own limits, checked before anything is played.
    fn check(&self, database: Option<&str>) -> Result<(), RateError> {
        for (flag, asked) in [
            ("games", self.games),
            ("calibration-games", self.calibration_games),
        ] {
            if asked > self.max_games {
                return Err(RateError::TooManyGames {
                    flag,
                    asked,
                    max: self.max_games,
                });
            }
        }
        if self.games == 0 {
            return Err(RateError::NoAgentGames);
        }
        if !(1..=MAX_MOVETIME_MS).contains(&self.movetime_ms) {
            return Err(RateError::MoveTime(self.movetime_ms));
        }
        if self.record && database.is_none() {
            return Err(RateError::RecordNeedsDatabase);
        }
        Ok(())
    }
}

pub fn run(command: ChessCommand) -> anyhow::Result<()> {
    match command {
        ChessCommand::Selfplay(args) => selfplay(args),
        ChessCommand::Rate(args) => rate(args),
    }
}

fn selfplay(args: SelfPlayArgs) -> anyhow::Result<()> {
    let config = SelfPlayConfig {
        games: args.games,
        seed: args.seed,
        games_per_version: args.games_per_version,
        ..SelfPlayConfig::default()
    };
    let pool = match args.judge {
        SelfPlayJudge::Stockfish => Some(EnginePool::start(EngineConfig {
            limit: SearchLimit::Depth(args.engine.stockfish_depth),
            processes: 1,
            ..EngineConfig::new(args.engine.path()?)
        })?),
        SelfPlayJudge::Search => None,
    };
    println!(
        "version  games  agent moves  sacrifice rate  sound  loss cp  aggression  reward   W/D/L"
    );
    let report = selfplay::run(&config, pool.as_ref(), |v| {
        println!(
            "{:>7}  {:>5}  {:>11}  {:>14.3}  {:>4.0}%  {:>7.0}  {:>10.2}  {:>6.3}   {}/{}/{}",
            v.version,
            v.games,
            v.agent_moves,
            v.sacrifice_rate(),
            100.0 * v.sound_share(),
            v.mean_loss_cp,
            v.mean_aggression,
            v.mean_reward,
            v.wins,
            v.draws,
            v.losses
        );
    })?;
    let params = &report.final_params;
    let weights: Vec<String> = params
        .named_weights()
        .iter()
        .map(|(name, w)| format!("{name} {w:.2}"))
        .collect();
    println!(
        "final weights (version {}): {}",
        params.version,
        weights.join(", ")
    );
    if let Some(path) = &args.save_policy {
        std::fs::write(path, serde_json::to_string_pretty(params)?)?;
        println!("saved version {} to {}", params.version, path.display());
    }
    println!("{}", report.summary_line());
    Ok(())
}

fn rate(args: RateArgs) -> anyhow::Result<()> {
    let database = args.database_url.clone().filter(|url| !url.is_empty());
    args.check(database.as_deref())?;
    let file = match &args.policy {
        Some(path) => {
            let text = std::fs::read_to_string(path)?;
            Some(
                PolicyParams::from_json(&serde_json::from_str(&text)?)
                    .map_err(anyhow::Error::msg)?,
            )
        }
        None => None,
    };
    let params = match (file, &database) {
        (Some(file), Some(url)) if args.record => {
            let version = file.version;
            let stored = with_database(url, move |db| async move {
                let mut conn = db.acquire().await?;
                match super::store::policy(&mut conn, version).await {
                    Ok(stored) => Ok(Some(stored)),
                    Err(StoreError::Database(sqlx::Error::RowNotFound)) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            })?;
            if stored.as_ref() != Some(&file) {
                return Err(RateError::PolicyNotStored(version).into());
            }
            file
        }
        (Some(file), _) => file,
        (None, Some(url)) => with_database(url, |db| async move {
            let mut conn = db.acquire().await?;
            Ok(super::store::latest_policy(&mut conn).await?.0)
        })?,
        (None, None) => PolicyParams::default(),
    };
    let path = args
        .stockfish
        .clone()
        .or_else(stockfish::locate)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no Stockfish found: apt-get install stockfish, or pass --stockfish PATH"
            )
        })?;
    let engine = EnginePool::start(EngineConfig {
        limit: SearchLimit::MoveTime(args.movetime_ms),
        strength: Some(Strength::Elo(rating::ANCHOR_ELO as u32)),
        processes: 1,
        ..EngineConfig::new(path)
    })?;
    let rungs = rating::ladder();
    let agent = format!("policy version {}", params.version);
    println!(
        "{agent}: {} games against each of {} rungs, {} calibration games per neighbouring pair, \
         Stockfish at {} ms a move",
        args.games,
        rungs.len(),
        args.calibration_games,
        args.movetime_ms
    );
    let name = |i: usize| {
        if i == rungs.len() {
            agent.clone()
        } else {
            format!("rung {i}")
        }
    };
    let schedule = Schedule {
        calibration_games: args.calibration_games,
        agent_games: args.games,
    };
    let mut rng = StdRng::seed_from_u64(args.seed);
    let report = rating::rate(&rungs, &params, schedule, &engine, &mut rng, |a, b, r| {
        println!(
            "  {} vs {}: {}/{}/{} (W/D/L)",
            name(a),
            name(b),
            r.wins,
            r.draws,
            r.losses
        );
    })?;
    for (i, (rung, estimate)) in rungs.iter().zip(&report.ratings).enumerate() {
        let shown = if i == 0 {
            format!("{:.0} (anchor)", rating::ANCHOR_ELO)
        } else {
            elo_shown(estimate)
        };
        println!("rung {i}: {shown:<24} {}", rung.name());
    }
    let elo = report.agent_rating();
    println!(
        "Elo of {agent}: {} over {} games; sacrifice rate {:.3} ({} of {} moves)",
        elo_shown(&elo),
        report.agent_games(),
        report.sacrifice_rate(),
        report.agent_sacrifices,
        report.agent_moves
    );
    if args.record
        && let Some(url) = &database
    {
        if elo == EloEstimate::UNKNOWN {
            return Err(RateError::Unrated.into());
        }
        let row = NewRating {
            policy_version: params.version,
            elo: elo.point,
            elo_low: elo.low,
            elo_high: elo.high,
            games: i32::try_from(report.agent_games())?,
            calibration_games: i32::try_from(
                report.calibration.iter().map(Record::games).sum::<usize>(),
            )?,
            sacrifice_rate: report.sacrifice_rate(),
        };
        let id = with_database(url, move |db| async move {
            let mut conn = db.acquire().await?;
            Ok(super::ratings::insert(&mut conn, &row).await?)
        })?;
        println!("recorded as rating {id} of {agent}");
    }
    Ok(())
}

fn elo_shown(estimate: &EloEstimate) -> String {
    if *estimate == EloEstimate::UNKNOWN {
        "open on both sides".into()
    } else {
        estimate.shown()
    }
}

/// Runs `work` on Postgres at `url`, migrated first, on a runtime of its own in a thread of its
/// own: the chess commands are synchronous and run inside the binary's runtime, which cannot
/// block on a future from there.
fn with_database<T, F, Fut>(url: &str, work: F) -> anyhow::Result<T>
where
    T: Send,
    F: FnOnce(sqlx::PgPool) -> Fut + Send,
    Fut: Future<Output = anyhow::Result<T>>,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async {
                    let db = crate::db::connect(url, 2).await?;
                    crate::db::migrate(&db).await?;
                    work(db).await
                })
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the database work panicked")))
    })
}

/// `lachesis bench chess`: the agent's time to answer at its default depth, over positions from
/// self-play games, for the default policy and a learned (more aggressive) one.
#[derive(Args)]
pub struct MoveLatencyArgs {
    /// Games whose positions are timed.
    #[arg(long, default_value_t = 10)]
    pub games: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn bench_latency(args: MoveLatencyArgs) {
    let mut rng = StdRng::seed_from_u64(args.seed);
    let baseline = PolicyParams::default();
    let mut positions: Vec<Chess> = Vec::new();
    for g in 0..args.games {
        let side = if g % 2 == 0 {
            lachesis_shared::chess::Side::White
        } else {
            lachesis_shared::chess::Side::Black
        };
        let game = selfplay::play_game(&baseline, &baseline, side, 120, &mut rng);
        let mut pos = Chess::default();
        for uci in &game.ucis {
            positions.push(pos.clone());
            let Ok(m) = lachesis_shared::chess::rules::parse_uci(&pos, uci) else {
                break;
            };
            pos.play_unchecked(m);
        }
    }
    let mut millis = Vec::with_capacity(positions.len());
    let mut nodes = 0u64;
    let started = Instant::now();
    for pos in &positions {
        let t = Instant::now();
        if let Some(d) = agent::choose(&baseline, pos, &mut rng) {
            nodes += d.nodes;
        }
        millis.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let total = started.elapsed().as_secs_f64();
    millis.sort_by(f64::total_cmp);
    let pct = |p: f64| millis[((millis.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "agent move latency at depth {} over {} positions: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {:.0} nodes/s",
        baseline.depth,
        millis.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        millis.last().copied().unwrap_or(0.0),
        nodes as f64 / total.max(1e-9)
    );
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Rate {
        #[command(flatten)]
        args: RateArgs,
    }

    fn checked(flags: &[&str], database: Option<&str>) -> Result<(), RateError> {
        let flags = std::iter::once("rate").chain(flags.iter().copied());
        Rate::try_parse_from(flags).unwrap().args.check(database)
    }

    #[test]
    fn rate_flags_are_checked_before_anything_is_played() {
        assert_eq!(checked(&[], None), Ok(()));
        assert_eq!(
            checked(&["--games", "201"], None),
            Err(RateError::TooManyGames {
                flag: "games",
                asked: 201,
                max: 200
            })
        );
        assert_eq!(
            checked(&["--games", "201", "--max-games", "300"], None),
            Ok(())
        );
        assert_eq!(
            checked(
                &[
                    "--games",
                    "4",
                    "--calibration-games",
                    "5",
                    "--max-games",
                    "4"
                ],
                None
            ),
            Err(RateError::TooManyGames {
                flag: "calibration-games",
                asked: 5,
                max: 4
            })
        );
        assert_eq!(checked(&["--calibration-games", "0"], None), Ok(()));
        assert_eq!(
            checked(&["--games", "0"], None),
            Err(RateError::NoAgentGames)
        );
        assert_eq!(
            checked(&["--movetime-ms", "0"], None),
            Err(RateError::MoveTime(0))
        );
        assert_eq!(
            checked(&["--movetime-ms", "1001"], None),
            Err(RateError::MoveTime(1001))
        );
        assert_eq!(
            checked(&["--record"], None),
            Err(RateError::RecordNeedsDatabase)
        );
        assert_eq!(checked(&["--record"], Some("postgres://db")), Ok(()));
    }
}
