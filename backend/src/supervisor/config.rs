//! The restart pacing's flags.

use std::time::Duration;

use anyhow::bail;

use super::Backoff;

/// Flags and environment variables (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RestartArgs {
    /// Pause before a failed server task (live bridge, status sampler, in-process environments,
    /// the model's worker) starts again, in milliseconds; doubled after each failure in a row.
    #[arg(long, env = "LACHESIS_RESTART_BACKOFF_MS")]
    pub restart_backoff_ms: Option<u64>,
    /// Longest pause before a failed server task starts again, in seconds.
    #[arg(long, env = "LACHESIS_RESTART_BACKOFF_MAX_S")]
    pub restart_backoff_max_s: Option<u64>,
    /// Seconds a task must run before a failure counts as a new streak (shortest pause again).
    #[arg(long, env = "LACHESIS_RESTART_HEALTHY_AFTER_S")]
    pub restart_healthy_after_s: Option<u64>,
}

impl RestartArgs {
    pub fn resolve(&self) -> anyhow::Result<Backoff> {
        let defaults = Backoff::default();
        let backoff = Backoff {
            initial: self
                .restart_backoff_ms
                .map_or(defaults.initial, Duration::from_millis),
            max: self
                .restart_backoff_max_s
                .map_or(defaults.max, Duration::from_secs),
            healthy_after: self
                .restart_healthy_after_s
                .map_or(defaults.healthy_after, Duration::from_secs),
        };
        // A zero pause would let a task that fails at once spin a core.
        if backoff.initial.is_zero() {
            bail!("--restart-backoff-ms must be at least 1");
        }
        if backoff.max < backoff.initial {
            bail!("--restart-backoff-max-s must not be shorter than --restart-backoff-ms");
        }
        Ok(backoff)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        restarts: RestartArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<Backoff> {
        let cli = Cli::try_parse_from(std::iter::once("lachesis").chain(args.iter().copied()))?;
        cli.restarts.resolve()
    }

    #[test]
    fn defaults_are_one_second_doubling_to_a_minute() {
        assert_eq!(parse(&[]).unwrap(), Backoff::default());
        assert_eq!(Backoff::default().initial, Duration::from_secs(1));
        assert_eq!(Backoff::default().max, Duration::from_secs(60));
        assert_eq!(Backoff::default().healthy_after, Duration::from_secs(60));
    }

    #[test]
    fn flags_set_each_limit_and_nonsense_is_refused() {
        let backoff = parse(&[
            "--restart-backoff-ms",
            "250",
            "--restart-backoff-max-s",
            "5",
            "--restart-healthy-after-s",
            "30",
        ])
        .unwrap();
        assert_eq!(
            backoff,
            Backoff {
                initial: Duration::from_millis(250),
                max: Duration::from_secs(5),
                healthy_after: Duration::from_secs(30),
            }
        );
        assert!(parse(&["--restart-backoff-ms", "0"]).is_err());
        assert!(
            parse(&[
                "--restart-backoff-ms",
                "5000",
                "--restart-backoff-max-s",
                "1"
            ])
            .is_err()
        );
    }
}
