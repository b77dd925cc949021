//! `lachesis bench arena-votes`: votes per second through the real HTTP route with every
//! integrity check on (the voter's battle, answers complete, one vote, the reading-time and
//! same-side filters, the live announcement), from many concurrent visitors.
//!
//! The battles are seeded ready in the database (answered a minute ago), so the figure is the vote
//! path alone, not the model writing answers.

use std::time::{Duration, Instant};

use lachesis_shared::arena::{ArenaKind, ContenderPolicy, VoteChoice};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::settings::ArenaSettings;
use super::store;
use crate::hosting::rate::Rate;

#[derive(Debug, clap::Args)]
pub struct ArenaVotesBenchArgs {
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
    /// Concurrent voters (each a visitor with its own token).
    #[arg(long, default_value_t = 100)]
    pub voters: usize,
    /// Votes each voter casts, one after the other.
    #[arg(long, default_value_t = 50)]
    pub votes: usize,
    /// Contenders the battles are drawn from.
    #[arg(long, default_value_t = 10)]
    pub contenders: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug)]
pub struct ArenaVotesReport {
    pub cast: usize,
    pub counted: usize,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl ArenaVotesReport {
    pub fn votes_per_second(&self) -> f64 {
        self.cast as f64 / self.seconds.max(1e-9)
    }
}

pub async fn run(args: &ArenaVotesBenchArgs) -> anyhow::Result<ArenaVotesReport> {
    anyhow::ensure!(args.contenders >= 2, "--contenders must be at least 2");
    let unlimited = Rate {
        per_minute: u64::MAX / 2,
        burst: u64::MAX / 2,
        remember: 1_000_000,
    };
    // The rates are lifted (one address sends everything); every other check stays on.
    let arena = ArenaSettings {
        votes: unlimited,
        address_votes: unlimited,
        visitors: unlimited,
        ..ArenaSettings::default()
    };
    let mut config = crate::config::ServeConfig::local(&args.database_url);
    config.arena = arena;
    config.db_max_connections = 32;
    let server = crate::app::Server::build(&config).await?;
    let base = format!("http://{}", server.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run_until(async move {
        let _ = stopped.await;
    }));
    let db = crate::db::connect(&args.database_url, 4).await?;
    let run_tag: u32 = rand::random();
    let mut ids = Vec::new();
    for k in 0..args.contenders {
        let policy = ContenderPolicy::Embedded {
            temperature: 0.7,
            system: None,
            adapter: None,
        };
        ids.push(
            store::insert_contender(&db, &format!("bench-{run_tag:08x}-{k}"), &policy, &[]).await?,
        );
    }
    let client = reqwest::Client::new();
    let mut voters = Vec::new();
    for _ in 0..args.voters {
        let token: lachesis_shared::arena::VisitorToken = client
            .post(format!("{base}/api/arena/visitors"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let id = store::visitor(&db, &crate::auth::secrets::token_hash(&token.token))
            .await?
            .ok_or_else(|| anyhow::anyhow!("the visitor just made is not stored"))?;
        let key = format!("visitor:{id}");
        let battles =
            store::seed_ready_battles(&db, ArenaKind::Catbot, &ids, &key, args.votes, args.seed)
                .await?;
        voters.push((token.token, battles));
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (n, (token, battles)) in voters.into_iter().enumerate() {
        let client = client.clone();
        let base = base.clone();
        let seed = args.seed.wrapping_add(n as u64);
        tasks.spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut latencies = Vec::with_capacity(battles.len());
            let mut counted = 0;
            for battle in battles {
                let choice = [
                    VoteChoice::A,
                    VoteChoice::B,
                    VoteChoice::Tie,
                    VoteChoice::BothBad,
                ][rng.random_range(0..4)];
                let sent = Instant::now();
                let view: lachesis_shared::arena::BattleView = client
                    .post(format!("{base}/api/arena/battles/{battle}/vote"))
                    .header(super::voter::VISITOR_HEADER, &token)
                    .json(&serde_json::json!({"choice": choice}))
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                latencies.push(sent.elapsed());
                counted += usize::from(view.excluded.is_none());
            }
            Ok::<_, anyhow::Error>((latencies, counted))
        });
    }
    let mut latencies: Vec<Duration> = Vec::new();
    let mut counted = 0;
    while let Some(done) = tasks.join_next().await {
        let (l, c) = done??;
        latencies.extend(l);
        counted += c;
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    Ok(ArenaVotesReport {
        cast: latencies.len(),
        counted,
        seconds,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    })
}

pub fn print_report(args: &ArenaVotesBenchArgs, r: &ArenaVotesReport) {
    println!(
        "arena votes: {} voters x {} votes over HTTP with integrity checks on: {} cast ({} counted) \
         in {:.2} s = {:.0} votes/s; latency p50 {:.2} ms, p99 {:.2} ms",
        args.voters,
        args.votes,
        r.cast,
        r.counted,
        r.seconds,
        r.votes_per_second(),
        r.p50_ms,
        r.p99_ms
    );
}
