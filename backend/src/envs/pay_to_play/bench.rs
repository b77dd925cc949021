//! `lachesis bench pay-to-play`: the bandit's value per dollar on real episodes against an oracle
//! that knows each card's true quality.
//!
//! Every episode is a real round: a cat task, answers of mixed quality (from none to all of the
//! need's remedies, so judges have something to disagree on), the bandit's panel paid through the
//! ledger and its verdicts recorded, which is what the bandit learns from. A card's true quality
//! is measured apart, in evaluation mode on the same tasks: its agreement with the consensus of
//! every card (`1 - |score - consensus|`), which the bandit never sees. The oracle pays for the
//! pair with the best true quality per dollar; the figure is the bandit's value per dollar over
//! the second half of the episodes, as a share of the oracle's.

use std::collections::HashMap;

use lachesis_shared::cats::CatTask;
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_shared::marketplace::PanelChoice;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::envs::cat_caretaker::data::CatData;
use crate::ledger::Ledger;
use crate::marketplace::judges::Judges;
use crate::marketplace::panel::{
    Market, PanelConfig, PanelError, Round, RoundOutcome, judge_round,
};
use crate::settlement::Settler;

#[derive(Debug, clap::Args)]
pub struct PayToPlayBenchArgs {
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
    #[arg(long, default_value_t = 300)]
    pub episodes: usize,
    /// Cards per panel.
    #[arg(long, default_value_t = 2)]
    pub panel: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug)]
pub struct PayToPlayBenchReport {
    pub episodes: usize,
    /// Each card's true quality (agreement with everyone's consensus) and price.
    pub cards: Vec<(String, f64, i64)>,
    pub bandit_value_per_usdc: f64,
    pub oracle_value_per_usdc: f64,
    pub oracle_panel: Vec<String>,
    pub spent: MicroUsdc,
    /// How often each card was on the bandit's panel in the second half.
    pub picks: Vec<(String, usize)>,
}

impl PayToPlayBenchReport {
    pub fn ratio(&self) -> f64 {
        self.bandit_value_per_usdc / self.oracle_value_per_usdc
    }
}

/// Answers to a task naming `k` of its remedies, for k from none to all.
fn answers(task: &CatTask, rng: &mut StdRng) -> Vec<String> {
    let mut remedies = task.scenario.remedy.clone();
    remedies.shuffle(rng);
    (0..4)
        .map(|i| {
            let k = (i * remedies.len()).div_ceil(3).min(remedies.len());
            if k == 0 {
                "I give it a cuddle and carry on.".to_string()
            } else {
                format!("I {}.", remedies[..k].join(" and "))
            }
        })
        .collect()
}

pub async fn run(args: &PayToPlayBenchArgs) -> anyhow::Result<PayToPlayBenchReport> {
    let db = crate::db::connect(&args.database_url, 8).await?;
    crate::db::migrate(&db).await?;
    crate::marketplace::cards::seed(&db).await?;
    let ledger = Ledger::new(db.clone());
    let judges = Judges::default();
    let data = CatData::builtin()?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let tasks: Vec<(CatTask, Vec<String>)> = (0..args.episodes)
        .map(|_| {
            let task = data.task(rng.random());
            let answers = answers(&task, &mut rng);
            (task, answers)
        })
        .collect();

    // The truth, in evaluation mode (unpaid, unrecorded).
    let market = Market::load(&db, &judges).await?;
    let mut quality = vec![0.0; market.cards.len()];
    for (task, answers) in &tasks {
        for answer in answers {
            let mut scores = Vec::with_capacity(market.cards.len());
            for card in 0..market.cards.len() {
                scores.push(heard_score(&judges, &market, card, task, answer).await);
            }
            let consensus = scores.iter().sum::<f64>() / scores.len().max(1) as f64;
            for (q, score) in quality.iter_mut().zip(&scores) {
                *q += 1.0 - (score - consensus).abs();
            }
        }
    }
    let n = tasks.iter().map(|(_, a)| a.len()).sum::<usize>().max(1) as f64;
    quality.iter_mut().for_each(|q| *q /= n);

    // The bandit, on real paid rounds from a budget big enough never to bind.
    let run = format!("bench-p2p-{:08x}", rng.random::<u32>());
    let budget = ledger
        .account(
            &format!("budget/{run}/agent"),
            AccountKind::Budget,
            None,
            None,
        )
        .await?;
    ledger
        .fund(&format!("fund/{run}"), budget, MicroUsdc(1_000_000_000))
        .await?;
    let config = PanelConfig {
        run: run.clone(),
        panel: args.panel,
        cost_weight: 0.0,
    };
    let (mut value, mut cost, mut spent) = (0.0, 0i64, 0i64);
    let mut picks: HashMap<String, usize> = HashMap::new();
    for (episode, (task, answers)) in tasks.iter().enumerate() {
        let market = Market::load(&db, &judges).await?;
        let key = format!("{run}/episode/{episode}");
        let round = Round {
            key: &key,
            budget,
            task,
            answers,
        };
        let outcome = bandit_round(&ledger, &judges, &market, &round, &config, None).await?;
        let RoundOutcome::Judged(result) = outcome else {
            anyhow::bail!("a round was skipped with a budget that cannot run out");
        };
        spent += result.paid.0;
        if episode >= tasks.len() / 2 {
            for card in &result.cards {
                let i = market
                    .cards
                    .iter()
                    .position(|c| c.slug == card.slug)
                    .expect("a paid card is in the market");
                value += quality[i];
                cost += card.price.0;
                *picks.entry(card.slug.clone()).or_default() += 1;
            }
        }
    }
    let per_usdc = |value: f64, micros: i64| value / (micros as f64 / 1e6);
    // The oracle: the panel of the same size with the best true quality per dollar.
    let mut oracle = (0.0, Vec::new());
    let n_cards = market.cards.len();
    for mask in 0u32..(1 << n_cards) {
        if mask.count_ones() as usize != args.panel.min(n_cards) {
            continue;
        }
        let members: Vec<usize> = (0..n_cards).filter(|i| mask & (1 << i) != 0).collect();
        let v = per_usdc(
            members.iter().map(|&i| quality[i]).sum(),
            members.iter().map(|&i| market.cards[i].price).sum(),
        );
        if v > oracle.0 {
            oracle = (v, members);
        }
    }
    let mut picks: Vec<(String, usize)> = picks.into_iter().collect();
    picks.sort_by_key(|(slug, n)| (std::cmp::Reverse(*n), slug.clone()));
    Ok(PayToPlayBenchReport {
        episodes: tasks.len(),
        cards: market
            .cards
            .iter()
            .zip(&quality)
            .map(|(c, q)| (c.slug.clone(), *q, c.price))
            .collect(),
        bandit_value_per_usdc: per_usdc(value, cost),
        oracle_value_per_usdc: oracle.0,
        oracle_panel: oracle
            .1
            .iter()
            .map(|&i| market.cards[i].slug.clone())
            .collect(),
        spent: MicroUsdc(spent),
        picks,
    })
}

/// Pays, in the ledger alone, and hears the panel the bandit picks from `market` with what the
/// round's budget has left, or `replayed`: the panel an earlier run of the round paid.
pub async fn bandit_round(
    ledger: &Ledger,
    judges: &Judges,
    market: &Market,
    round: &Round<'_>,
    config: &PanelConfig,
    replayed: Option<Vec<usize>>,
) -> Result<RoundOutcome, PanelError> {
    let chosen = match replayed {
        Some(panel) => panel,
        None => {
            let available = ledger.balance(round.budget).await?.available.0;
            market.bandit_pick(config.panel, available)
        }
    };
    judge_round(
        ledger,
        &Settler::Simulated,
        judges,
        market,
        round,
        chosen,
        PanelChoice::Bandit,
        config,
    )
    .await
}

/// One card's score of one answer (unreadable counts as the middle, which costs it agreement).
async fn heard_score(
    judges: &Judges,
    market: &Market,
    card: usize,
    task: &CatTask,
    answer: &str,
) -> f64 {
    match judges
        .verdict(&market.cards[card].judge, task, answer)
        .await
    {
        Ok(text) => crate::envs::cat_caretaker::verdict::parse_judge_score(&text).unwrap_or(0.5),
        Err(_) => 0.5,
    }
}
