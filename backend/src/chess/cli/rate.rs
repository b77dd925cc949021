//! `lachesis chess rate`: the agent's Elo on a ladder anchored at Stockfish, optionally recorded
//! in Postgres.

use std::path::PathBuf;

use clap::Args;
use lachesis_chess::agent::PolicyParams;
use lachesis_chess::rating::{self, EloEstimate, Record, Schedule};
use lachesis_chess::stockfish::{self, EngineConfig, EnginePool, SearchLimit, Strength};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::chess::ratings::{self, NewRating};
use crate::chess::store::{self, StoreError};

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

pub(super) fn rate(args: RateArgs) -> anyhow::Result<()> {
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
                match store::policy(&mut conn, version).await {
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
            Ok(store::latest_policy(&mut conn).await?.0)
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
            Ok(ratings::insert(&mut conn, &row).await?)
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
