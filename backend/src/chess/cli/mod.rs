//! `lachesis chess ...`: self-play learning, the Elo yardstick against Stockfish, and the
//! move-latency benchmark; no server needed (`rate --record` stores its result in Postgres).

mod latency;
mod rate;
mod selfplay;

use clap::Subcommand;

pub use latency::{MoveLatencyArgs, bench_latency};
pub use rate::{RateArgs, RateError};
pub use selfplay::{EngineArgs, SelfPlayArgs, SelfPlayJudge};

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

pub fn run(command: ChessCommand) -> anyhow::Result<()> {
    match command {
        ChessCommand::Selfplay(args) => selfplay::selfplay(args),
        ChessCommand::Rate(args) => rate::rate(args),
    }
}
