//! The host's arena settings: who may vote, how fast, and what makes a vote suspicious.

use std::time::Duration;

use crate::hosting::rate::Rate;

/// Who may vote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ArenaVoters {
    /// Anyone: a visitor without an account gets an anonymous voting token.
    #[default]
    Visitors,
    /// Only signed-in people.
    Accounts,
}

/// Who plays the cat in a catbot dialogue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ArenaCat {
    /// The caretaker environment's rule-based cat: it shows more of its need's behaviors until a
    /// caretaker turn names a remedy, then settles.
    #[default]
    Rules,
    /// The embedded model, told the cat's hidden need, reacting in behaviors and sounds and
    /// ending each reaction with its verdict, a purr or a hiss.
    Model,
}

/// Most caretaker turns a catbot dialogue may allow: each costs both contenders a reply.
pub const MAX_CAT_TURNS: usize = 6;

/// Flags and environment variables (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ArenaArgs {
    /// Who may vote in the arena: `visitors` (anonymous voting tokens) or `accounts`.
    #[arg(long, env = "LACHESIS_ARENA_VOTERS", value_enum)]
    pub arena_voters: Option<ArenaVoters>,
    /// Votes one voter, and one address, may cast per minute (also the burst).
    #[arg(long, env = "LACHESIS_ARENA_VOTES_PER_MINUTE")]
    pub arena_votes_per_minute: Option<u64>,
    /// Battles one voter, and one address, may be dealt per minute (each costs two answers).
    #[arg(long, env = "LACHESIS_ARENA_BATTLES_PER_MINUTE")]
    pub arena_battles_per_minute: Option<u64>,
    /// Votes one address may cast per minute, all its voters together (a household or an
    /// office shares one).
    #[arg(long, env = "LACHESIS_ARENA_ADDRESS_VOTES_PER_MINUTE")]
    pub arena_address_votes_per_minute: Option<u64>,
    /// Battles one address may be dealt per minute, all its voters together.
    #[arg(long, env = "LACHESIS_ARENA_ADDRESS_BATTLES_PER_MINUTE")]
    pub arena_address_battles_per_minute: Option<u64>,
    /// Anonymous voting tokens one address may take per hour.
    #[arg(long, env = "LACHESIS_ARENA_VISITORS_PER_HOUR")]
    pub arena_visitors_per_hour: Option<u64>,
    /// A vote cast sooner than this many seconds after both answers were complete is recorded
    /// but not counted (nobody reads two answers that fast).
    #[arg(long, env = "LACHESIS_ARENA_MIN_VOTE_S")]
    pub arena_min_vote_s: Option<f64>,
    /// A voter whose last N votes all picked the same side (A, or B) has the Nth recorded but
    /// not counted: sides are dealt at random, so a long run says the voter is not reading.
    #[arg(long, env = "LACHESIS_ARENA_SAME_SIDE_RUN")]
    pub arena_same_side_run: Option<usize>,
    /// Most tokens a contender may write in one answer.
    #[arg(long, env = "LACHESIS_ARENA_MAX_ANSWER_TOKENS")]
    pub arena_max_answer_tokens: Option<usize>,
    /// Battles being answered at once, server-wide: each holds the model for two answers, so
    /// this bounds what all voters together can ask of it.
    #[arg(long, env = "LACHESIS_ARENA_CONCURRENT_BATTLES")]
    pub arena_concurrent_battles: Option<usize>,
    /// Seconds a contender has to answer before the battle is voided.
    #[arg(long, env = "LACHESIS_ARENA_ANSWER_TIMEOUT_S")]
    pub arena_answer_timeout_s: Option<u64>,
    /// Bootstrap rounds behind the leaderboard's intervals.
    #[arg(long, env = "LACHESIS_ARENA_BOOTSTRAP_ROUNDS")]
    pub arena_bootstrap_rounds: Option<usize>,
    /// Caretaker turns in a catbot battle (1 to 6): 1 answers the cat once; more play a
    /// dialogue, the cat reacting between turns, until a caretaker's `Final:` answer or a
    /// settled cat.
    #[arg(long, env = "LACHESIS_ARENA_CAT_TURNS")]
    pub arena_cat_turns: Option<usize>,
    /// Who plays the cat in a catbot dialogue: `rules` or `model` (the embedded model).
    #[arg(long, env = "LACHESIS_ARENA_CAT", value_enum)]
    pub arena_cat: Option<ArenaCat>,
}

/// The resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaSettings {
    pub voters: ArenaVoters,
    pub votes: Rate,
    pub battles: Rate,
    pub address_votes: Rate,
    pub address_battles: Rate,
    pub visitors: Rate,
    pub min_vote: Duration,
    pub same_side_run: usize,
    pub max_answer_tokens: usize,
    pub concurrent_battles: usize,
    pub answer_timeout: Duration,
    pub bootstrap_rounds: usize,
    pub cat_turns: usize,
    pub cat: ArenaCat,
}

/// Voters and addresses whose buckets are remembered at once.
const REMEMBERED: usize = 100_000;

impl Default for ArenaSettings {
    fn default() -> Self {
        Self {
            voters: ArenaVoters::Visitors,
            votes: Rate {
                per_minute: 20,
                burst: 20,
                remember: REMEMBERED,
            },
            battles: Rate {
                per_minute: 10,
                burst: 10,
                remember: REMEMBERED,
            },
            address_votes: Rate {
                per_minute: 60,
                burst: 60,
                remember: REMEMBERED,
            },
            address_battles: Rate {
                per_minute: 30,
                burst: 30,
                remember: REMEMBERED,
            },
            // Per hour: counted in a bucket refilling at per_hour/60 a minute.
            visitors: Rate {
                per_minute: 1,
                burst: 60,
                remember: REMEMBERED,
            },
            min_vote: Duration::from_secs(2),
            same_side_run: 12,
            max_answer_tokens: 160,
            concurrent_battles: 4,
            answer_timeout: Duration::from_secs(120),
            bootstrap_rounds: 200,
            cat_turns: 1,
            cat: ArenaCat::Rules,
        }
    }
}

impl ArenaSettings {
    pub fn resolve(args: &ArenaArgs) -> anyhow::Result<Self> {
        let d = Self::default();
        let at_least_one = |name: &str, value: Option<u64>, default: u64| match value {
            Some(0) => Err(anyhow::anyhow!("{name} must be at least 1")),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let per_minute = |name: &str, value: Option<u64>, default: &Rate| {
            at_least_one(name, value, default.per_minute).map(|n| Rate {
                per_minute: n,
                burst: n,
                remember: REMEMBERED,
            })
        };
        let min_vote_s = args.arena_min_vote_s.unwrap_or(d.min_vote.as_secs_f64());
        if !(min_vote_s.is_finite() && (0.0..=3600.0).contains(&min_vote_s)) {
            anyhow::bail!("--arena-min-vote-s must be between 0 and 3600");
        }
        let visitors_per_hour = at_least_one(
            "--arena-visitors-per-hour",
            args.arena_visitors_per_hour,
            d.visitors.burst,
        )?;
        let bootstrap_rounds = args.arena_bootstrap_rounds.unwrap_or(d.bootstrap_rounds);
        if !(10..=10_000).contains(&bootstrap_rounds) {
            anyhow::bail!("--arena-bootstrap-rounds must be between 10 and 10000");
        }
        let cat_turns = args.arena_cat_turns.unwrap_or(d.cat_turns);
        if !(1..=MAX_CAT_TURNS).contains(&cat_turns) {
            anyhow::bail!("--arena-cat-turns must be between 1 and {MAX_CAT_TURNS}");
        }
        Ok(Self {
            voters: args.arena_voters.unwrap_or(d.voters),
            votes: per_minute(
                "--arena-votes-per-minute",
                args.arena_votes_per_minute,
                &d.votes,
            )?,
            battles: per_minute(
                "--arena-battles-per-minute",
                args.arena_battles_per_minute,
                &d.battles,
            )?,
            address_votes: per_minute(
                "--arena-address-votes-per-minute",
                args.arena_address_votes_per_minute,
                &d.address_votes,
            )?,
            address_battles: per_minute(
                "--arena-address-battles-per-minute",
                args.arena_address_battles_per_minute,
                &d.address_battles,
            )?,
            visitors: Rate {
                per_minute: visitors_per_hour.div_ceil(60),
                burst: visitors_per_hour,
                remember: REMEMBERED,
            },
            min_vote: Duration::from_secs_f64(min_vote_s),
            same_side_run: at_least_one(
                "--arena-same-side-run",
                args.arena_same_side_run.map(|n| n as u64),
                d.same_side_run as u64,
            )? as usize,
            max_answer_tokens: at_least_one(
                "--arena-max-answer-tokens",
                args.arena_max_answer_tokens.map(|n| n as u64),
                d.max_answer_tokens as u64,
            )? as usize,
            concurrent_battles: at_least_one(
                "--arena-concurrent-battles",
                args.arena_concurrent_battles.map(|n| n as u64),
                d.concurrent_battles as u64,
            )? as usize,
            answer_timeout: Duration::from_secs(at_least_one(
                "--arena-answer-timeout-s",
                args.arena_answer_timeout_s,
                d.answer_timeout.as_secs(),
            )?),
            bootstrap_rounds,
            cat_turns,
            cat: args.arena_cat.unwrap_or(d.cat),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_flags_and_refusals() {
        assert_eq!(
            ArenaSettings::resolve(&ArenaArgs::default()).unwrap(),
            ArenaSettings::default()
        );
        let set = ArenaSettings::resolve(&ArenaArgs {
            arena_voters: Some(ArenaVoters::Accounts),
            arena_votes_per_minute: Some(5),
            arena_address_battles_per_minute: Some(7),
            arena_min_vote_s: Some(0.5),
            arena_same_side_run: Some(4),
            arena_visitors_per_hour: Some(90),
            arena_cat_turns: Some(3),
            arena_cat: Some(ArenaCat::Model),
            ..ArenaArgs::default()
        })
        .unwrap();
        assert_eq!((set.cat_turns, set.cat), (3, ArenaCat::Model));
        assert_eq!(set.voters, ArenaVoters::Accounts);
        assert_eq!((set.votes.per_minute, set.votes.burst), (5, 5));
        assert_eq!(set.address_battles.per_minute, 7);
        assert_eq!(set.address_votes, ArenaSettings::default().address_votes);
        assert_eq!(set.min_vote, Duration::from_millis(500));
        assert_eq!(set.same_side_run, 4);
        assert_eq!((set.visitors.per_minute, set.visitors.burst), (2, 90));
        for bad in [
            ArenaArgs {
                arena_votes_per_minute: Some(0),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_min_vote_s: Some(f64::NAN),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_bootstrap_rounds: Some(1),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_same_side_run: Some(0),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_concurrent_battles: Some(0),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_cat_turns: Some(0),
                ..ArenaArgs::default()
            },
            ArenaArgs {
                arena_cat_turns: Some(MAX_CAT_TURNS + 1),
                ..ArenaArgs::default()
            },
        ] {
            assert!(ArenaSettings::resolve(&bad).is_err(), "{bad:?}");
        }
    }
}
