//! What keeps a hosted server safe from its own users: the limits on what one caller may ask,
//! the secrets key that seals what teams entrust to it, the loopback guard against web pages, and
//! the one place where a token's scope is checked for every route.

pub mod error;
pub mod loopback;
pub mod rate;
pub mod scope;
pub mod slots;

use std::time::Duration;

use crate::marketplace::outbound::OutboundLimits;
use crate::marketplace::probation::ProbationRules;
use crate::marketplace::sealed::SecretsKey;

/// Flags and environment variables (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HostingArgs {
    /// Seals teams' judge endpoint keys at rest: 64 hex digits (`openssl rand -hex 32`). Without
    /// it, team cards cannot carry a key.
    #[arg(long, env = "LACHESIS_SECRETS_KEY", hide_env_values = true)]
    pub secrets_key: Option<String>,
    /// Cards one team may have listed at once.
    #[arg(long, env = "LACHESIS_TEAM_CARD_LIMIT")]
    pub team_card_limit: Option<i64>,
    /// Evaluations a team card gives on probation before its quality is judged.
    #[arg(long, env = "LACHESIS_PROBATION_EVALUATIONS")]
    pub probation_evaluations: Option<i64>,
    /// Highest price (micro-USDC) at which a team card on probation is chosen.
    #[arg(long, env = "LACHESIS_PROBATION_PRICE_CAP")]
    pub probation_price_cap: Option<i64>,
    /// Seconds a team's judge endpoint has to answer.
    #[arg(long, env = "LACHESIS_JUDGE_TIMEOUT_S")]
    pub judge_timeout_s: Option<u64>,
    /// Largest answer read from a judge endpoint, in KiB.
    #[arg(long, env = "LACHESIS_JUDGE_MAX_RESPONSE_KIB")]
    pub judge_max_response_kib: Option<usize>,
    /// Largest `group_size` an environment may register with.
    #[arg(long, env = "LACHESIS_MAX_GROUP_SIZE")]
    pub max_group_size: Option<i64>,
    /// Largest `batch_size` a trainer may register with.
    #[arg(long, env = "LACHESIS_MAX_BATCH_SIZE")]
    pub max_batch_size: Option<i64>,
    /// Open WebSocket connections one client address may hold (IPv6: per /64).
    #[arg(long, env = "LACHESIS_WS_PER_ADDRESS")]
    pub ws_per_address: Option<usize>,
    /// The chess agent's searches running at once, server-wide.
    #[arg(long, env = "LACHESIS_CHESS_SEARCHES")]
    pub chess_searches: Option<usize>,
    /// Finished games one owner (user or team) may have reviewed at once; its other reviews
    /// wait, other owners' do not.
    #[arg(long, env = "LACHESIS_CHESS_REVIEWS_PER_OWNER")]
    pub chess_reviews_per_owner: Option<usize>,
    /// Seconds a chess review's claim on its game lasts; a review renews it after a judged move
    /// once a third has passed. A lapsed claim's game is taken for abandoned (its server
    /// stopped), and another review may take it.
    #[arg(long, env = "LACHESIS_CHESS_REVIEW_CLAIM_S")]
    pub chess_review_claim_s: Option<u64>,
    /// Seconds between looks for finished chess games that nobody is reviewing.
    #[arg(long, env = "LACHESIS_CHESS_REVIEW_SWEEP_S")]
    pub chess_review_sweep_s: Option<u64>,
    /// Seconds a hosted environment's trainer may stop taking groups before the environment's
    /// showcase may run again for its viewers.
    #[arg(long, env = "LACHESIS_TRAINER_IDLE_S")]
    pub trainer_idle_s: Option<u64>,
    /// Seconds a request may take before it is answered 408 (WebSockets and exports excepted).
    #[arg(long, env = "LACHESIS_REQUEST_TIMEOUT_S")]
    pub request_timeout_s: Option<u64>,
    /// Evaluations (MCP's `start_evaluation`) running at once on this instance; one caller has at
    /// most one running.
    #[arg(long, env = "LACHESIS_EVALUATIONS_AT_ONCE")]
    pub evaluations_at_once: Option<usize>,
    /// Seconds an evaluation may run before it is stopped and marked failed.
    #[arg(long, env = "LACHESIS_EVALUATION_TIMEOUT_S")]
    pub evaluation_timeout_s: Option<u64>,
    /// Items one feedback queue may hold.
    #[arg(long, env = "LACHESIS_FEEDBACK_QUEUE_ITEMS")]
    pub feedback_queue_items: Option<i64>,
    /// Seconds between looks for people's items whose round died without paying their verdicts;
    /// an item is left to its own round for as long past its deadline.
    #[arg(long, env = "LACHESIS_PEOPLE_ITEMS_SWEEP_S")]
    pub people_items_sweep_s: Option<u64>,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct Hosting {
    pub secrets_key: Option<SecretsKey>,
    pub team_card_limit: i64,
    pub probation: ProbationRules,
    pub judge: OutboundLimits,
    pub max_group_size: i64,
    pub max_batch_size: i64,
    pub ws_per_address: usize,
    pub chess_searches: usize,
    pub chess_reviews_per_owner: usize,
    pub chess_review_claim: Duration,
    pub chess_review_sweep: Duration,
    pub trainer_idle: Duration,
    pub request_timeout: Duration,
    pub evaluations_at_once: usize,
    pub evaluation_timeout: Duration,
    pub feedback_queue_items: i64,
    pub people_items_sweep: Duration,
}

impl Default for Hosting {
    fn default() -> Self {
        Self {
            secrets_key: None,
            team_card_limit: 5,
            probation: ProbationRules::default(),
            judge: OutboundLimits::default(),
            // Atropos groups are a few to a few hundred rollouts; batches a few thousand.
            max_group_size: 1024,
            max_batch_size: 65_536,
            ws_per_address: 32,
            chess_searches: crate::chess::DEFAULT_SEARCHES,
            chess_reviews_per_owner: crate::chess::lanes::DEFAULT_REVIEWS_PER_OWNER,
            chess_review_claim: crate::chess::DEFAULT_REVIEW_CLAIM,
            chess_review_sweep: crate::chess::DEFAULT_REVIEW_SWEEP,
            trainer_idle: crate::envs::runner::DEFAULT_DETACH_AFTER,
            request_timeout: Duration::from_secs(300),
            // One evaluation keeps the embedded model busy; two would halve everyone's speed.
            evaluations_at_once: 1,
            evaluation_timeout: Duration::from_secs(600),
            // Agreement reads a queue's judgements at once: 20k items × 20 overlap is some 400k
            // small rows.
            feedback_queue_items: crate::feedback::DEFAULT_QUEUE_ITEMS,
            people_items_sweep: crate::marketplace::abandoned::DEFAULT_SWEEP,
        }
    }
}

impl Hosting {
    pub fn resolve(args: &HostingArgs) -> anyhow::Result<Self> {
        let d = Self::default();
        let positive = |name: &str, value: Option<i64>, default: i64| match value {
            Some(v) if v < 1 => Err(anyhow::anyhow!("{name} must be at least 1")),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let seconds = |name: &str, value: Option<u64>, default: Duration| {
            let secs = positive(name, value.map(|v| v as i64), default.as_secs() as i64)?;
            Ok::<_, anyhow::Error>(Duration::from_secs(secs as u64))
        };
        let secrets_key = match args.secrets_key.as_deref().filter(|k| !k.is_empty()) {
            Some(hex) => Some(
                hex.parse::<SecretsKey>()
                    .map_err(|e| anyhow::anyhow!("--secrets-key: {e}"))?,
            ),
            None => None,
        };
        Ok(Self {
            secrets_key,
            team_card_limit: positive(
                "--team-card-limit",
                args.team_card_limit,
                d.team_card_limit,
            )?,
            probation: ProbationRules {
                evaluations: positive(
                    "--probation-evaluations",
                    args.probation_evaluations,
                    d.probation.evaluations,
                )?,
                price_cap: positive(
                    "--probation-price-cap",
                    args.probation_price_cap,
                    d.probation.price_cap,
                )?,
                ..d.probation
            },
            judge: OutboundLimits {
                timeout: seconds("--judge-timeout-s", args.judge_timeout_s, d.judge.timeout)?,
                max_response_bytes: positive(
                    "--judge-max-response-kib",
                    args.judge_max_response_kib.map(|v| v as i64),
                    (d.judge.max_response_bytes / 1024) as i64,
                )? as usize
                    * 1024,
            },
            max_group_size: positive("--max-group-size", args.max_group_size, d.max_group_size)?,
            max_batch_size: positive("--max-batch-size", args.max_batch_size, d.max_batch_size)?,
            ws_per_address: positive(
                "--ws-per-address",
                args.ws_per_address.map(|v| v as i64),
                d.ws_per_address as i64,
            )? as usize,
            chess_searches: positive(
                "--chess-searches",
                args.chess_searches.map(|v| v as i64),
                d.chess_searches as i64,
            )? as usize,
            chess_reviews_per_owner: positive(
                "--chess-reviews-per-owner",
                args.chess_reviews_per_owner.map(|v| v as i64),
                d.chess_reviews_per_owner as i64,
            )? as usize,
            chess_review_claim: seconds(
                "--chess-review-claim-s",
                args.chess_review_claim_s,
                d.chess_review_claim,
            )?,
            chess_review_sweep: seconds(
                "--chess-review-sweep-s",
                args.chess_review_sweep_s,
                d.chess_review_sweep,
            )?,
            trainer_idle: seconds("--trainer-idle-s", args.trainer_idle_s, d.trainer_idle)?,
            request_timeout: seconds(
                "--request-timeout-s",
                args.request_timeout_s,
                d.request_timeout,
            )?,
            evaluations_at_once: positive(
                "--evaluations-at-once",
                args.evaluations_at_once.map(|v| v as i64),
                d.evaluations_at_once as i64,
            )? as usize,
            evaluation_timeout: seconds(
                "--evaluation-timeout-s",
                args.evaluation_timeout_s,
                d.evaluation_timeout,
            )?,
            feedback_queue_items: positive(
                "--feedback-queue-items",
                args.feedback_queue_items,
                d.feedback_queue_items,
            )?,
            people_items_sweep: seconds(
                "--people-items-sweep-s",
                args.people_items_sweep_s,
                d.people_items_sweep,
            )?,
        })
    }
}

/// Answers 408 to a request whose handler has not answered within `--request-timeout-s`. A
/// WebSocket is answered at once (its upgrade) and a streamed export's rows flow after its
/// headers, so neither is cut by this.
pub async fn deadline(
    axum::extract::State(state): axum::extract::State<crate::app::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let limit = state.hosting.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => error::HostingError::Timeout(limit.as_secs()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_and_flags_override_them() {
        let d = Hosting::resolve(&HostingArgs::default()).unwrap();
        assert_eq!(d.team_card_limit, 5);
        assert_eq!(d.max_group_size, 1024);
        assert!(d.secrets_key.is_none());
        let given = HostingArgs {
            secrets_key: Some("ab".repeat(32)),
            team_card_limit: Some(2),
            max_batch_size: Some(64),
            judge_max_response_kib: Some(8),
            ..HostingArgs::default()
        };
        let h = Hosting::resolve(&given).unwrap();
        assert_eq!((h.team_card_limit, h.max_batch_size), (2, 64));
        assert_eq!(h.judge.max_response_bytes, 8 * 1024);
        assert!(h.secrets_key.is_some());
        assert_eq!(d.trainer_idle, Duration::from_secs(60));
        let idle = HostingArgs {
            trainer_idle_s: Some(5),
            ..HostingArgs::default()
        };
        assert_eq!(
            Hosting::resolve(&idle).unwrap().trainer_idle,
            Duration::from_secs(5)
        );
        let zero = HostingArgs {
            ws_per_address: Some(0),
            ..HostingArgs::default()
        };
        assert!(Hosting::resolve(&zero).is_err());
        let never_idle = HostingArgs {
            trainer_idle_s: Some(0),
            ..HostingArgs::default()
        };
        assert!(Hosting::resolve(&never_idle).is_err());
        let bad_key = HostingArgs {
            secrets_key: Some("short".into()),
            ..HostingArgs::default()
        };
        assert!(Hosting::resolve(&bad_key).is_err());
    }

    #[test]
    fn chess_reviews_are_one_per_owner_unless_a_flag_says_otherwise() {
        let d = Hosting::resolve(&HostingArgs::default()).unwrap();
        assert_eq!(d.chess_reviews_per_owner, 1);
        let two = HostingArgs {
            chess_reviews_per_owner: Some(2),
            ..HostingArgs::default()
        };
        assert_eq!(Hosting::resolve(&two).unwrap().chess_reviews_per_owner, 2);
        let none = HostingArgs {
            chess_reviews_per_owner: Some(0),
            ..HostingArgs::default()
        };
        assert!(Hosting::resolve(&none).is_err());
    }

    #[test]
    fn chess_review_claims_and_sweeps_have_defaults_and_flags() {
        let d = Hosting::resolve(&HostingArgs::default()).unwrap();
        assert_eq!(d.chess_review_claim, Duration::from_secs(300));
        assert_eq!(d.chess_review_sweep, Duration::from_secs(60));
        let given = HostingArgs {
            chess_review_claim_s: Some(30),
            chess_review_sweep_s: Some(5),
            ..HostingArgs::default()
        };
        let h = Hosting::resolve(&given).unwrap();
        assert_eq!(
            (h.chess_review_claim, h.chess_review_sweep),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        for zero in [
            HostingArgs {
                chess_review_claim_s: Some(0),
                ..HostingArgs::default()
            },
            HostingArgs {
                chess_review_sweep_s: Some(0),
                ..HostingArgs::default()
            },
        ] {
            assert!(Hosting::resolve(&zero).is_err());
        }
    }

    #[test]
    fn evaluations_feedback_queues_and_the_people_items_sweep_have_defaults_and_flags() {
        let d = Hosting::resolve(&HostingArgs::default()).unwrap();
        assert_eq!(d.evaluations_at_once, 1);
        assert_eq!(d.evaluation_timeout, Duration::from_secs(600));
        assert_eq!(d.feedback_queue_items, 20_000);
        assert_eq!(d.people_items_sweep, Duration::from_secs(30));
        let given = HostingArgs {
            evaluations_at_once: Some(3),
            evaluation_timeout_s: Some(20),
            feedback_queue_items: Some(9),
            people_items_sweep_s: Some(2),
            ..HostingArgs::default()
        };
        let h = Hosting::resolve(&given).unwrap();
        assert_eq!(h.evaluations_at_once, 3);
        assert_eq!(h.evaluation_timeout, Duration::from_secs(20));
        assert_eq!(h.feedback_queue_items, 9);
        assert_eq!(h.people_items_sweep, Duration::from_secs(2));
        for none in [
            HostingArgs {
                people_items_sweep_s: Some(0),
                ..HostingArgs::default()
            },
            HostingArgs {
                evaluations_at_once: Some(0),
                ..HostingArgs::default()
            },
            HostingArgs {
                evaluation_timeout_s: Some(0),
                ..HostingArgs::default()
            },
            HostingArgs {
                feedback_queue_items: Some(0),
                ..HostingArgs::default()
            },
        ] {
            assert!(Hosting::resolve(&none).is_err());
        }
    }
}
