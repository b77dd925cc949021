//! `lachesis bench chess`: how long the agent takes to choose a move.

use std::time::Instant;

use clap::Args;
use lachesis_chess::agent::{self, PolicyParams};
use lachesis_chess::selfplay;
use lachesis_chess::shakmaty::{Chess, Position};
use rand::SeedableRng;
use rand::rngs::StdRng;

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
        let game = selfplay::play_game(&baseline, &baseline, side, 120, false, &mut rng);
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
