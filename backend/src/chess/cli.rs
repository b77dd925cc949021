//! `lachesis chess ...`: self-play learning, the Elo yardstick against Stockfish, and the
//! move-latency benchmark; no server needed.

use std::time::Instant;

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use lachesis_chess::agent::{self, PolicyParams};
use lachesis_chess::rating::{self, MatchResult};
use lachesis_chess::selfplay::{self, SelfPlayConfig};
use lachesis_chess::shakmaty::{Chess, Position};
use lachesis_chess::stockfish::{self, EngineConfig, EnginePool, SearchLimit, Strength};
use lachesis_shared::chess::Side;
use rand::SeedableRng;
use rand::rngs::StdRng;

#[derive(Subcommand)]
pub enum ChessCommand {
    /// The agent plays a fixed baseline (its version 0), learns from the judged games, and
    /// prints per policy version its sacrifice rate, how many sacrifices were sound, judged
    /// aggression and results.
    Selfplay(SelfPlayArgs),
    /// The agent plays Stockfish held to fixed Elo levels; prints its Elo with a 95% interval.
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
    /// Games against each level, half with each colour.
    #[arg(long, default_value_t = 10)]
    pub games: usize,
    /// Stockfish's UCI_Elo levels to play (1350–2850).
    #[arg(long, value_delimiter = ',', default_value = "1350,1500")]
    pub levels: Vec<u32>,
    /// Stockfish's thinking time per move, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub movetime_ms: u64,
    /// Policy parameters (JSON, as `selfplay --save-policy` writes them); version 0 when absent.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, env = "LACHESIS_STOCKFISH")]
    pub stockfish: Option<PathBuf>,
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
    let params = match &args.policy {
        Some(path) => {
            let text = std::fs::read_to_string(path)?;
            PolicyParams::from_json(&serde_json::from_str(&text)?).map_err(anyhow::Error::msg)?
        }
        None => PolicyParams::default(),
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
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut results = Vec::new();
    println!(
        "policy version {} against Stockfish at {} ms a move",
        params.version, args.movetime_ms
    );
    for level in &args.levels {
        let opponent = EnginePool::start(EngineConfig {
            limit: SearchLimit::MoveTime(args.movetime_ms),
            strength: Some(Strength::Elo(*level)),
            processes: 1,
            ..EngineConfig::new(path.clone())
        })?;
        let mut record = [0usize; 3];
        for g in 0..args.games {
            let side = if g % 2 == 0 { Side::White } else { Side::Black };
            let outcome = rating::play_engine(&params, &opponent, side, 300, &mut rng)?;
            match selfplay::result_for(&outcome, side) {
                r if r > 0.0 => record[0] += 1,
                r if r < 0.0 => record[2] += 1,
                _ => record[1] += 1,
            }
        }
        let points = record[0] as f64 + 0.5 * record[1] as f64;
        println!(
            "  UCI_Elo {level}: {}/{}/{} (W/D/L), {points} of {}",
            record[0], record[1], record[2], args.games
        );
        results.push(MatchResult {
            opponent: f64::from(*level),
            games: args.games,
            points,
        });
    }
    println!(
        "Elo of policy version {}: {}",
        params.version,
        rating::estimate(&results).shown()
    );
    Ok(())
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
