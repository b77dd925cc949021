//! Who may create accounts, how sessions, tokens and invites age, and how much password hashing
//! runs at once: fixed at start. The policy also holds the runtime guards that enforce the rates
//! (the sign-up limiter, the argon2 gate), so handlers reach them through `AppState::accounts`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use lachesis_shared::accounts::Registration;

use super::limiter::{MAX_KEYS, WindowLimiter};
use super::secrets::PasswordHashing;

pub const DEFAULT_REGISTRATIONS_PER_HOUR: u32 = 10;
/// Two argon2id runs at once: 38 MiB and two cores at most, a sign-in still takes well under a
/// second when nobody floods.
pub const DEFAULT_PASSWORD_HASH_CONCURRENCY: u32 = 2;
pub const DEFAULT_SESSION_IDLE_HOURS: u32 = 7 * 24;
pub const DEFAULT_SESSION_DAYS: u32 = 14;
pub const DEFAULT_TOKEN_MAX_DAYS: u32 = 365;
pub const DEFAULT_INVITE_DAYS: u32 = 7;
pub const DEFAULT_TEAMS_PER_USER: u32 = 10;

/// `--registration`, as clap parses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RegistrationMode {
    Open,
    Invite,
    Closed,
}

impl From<RegistrationMode> for Registration {
    fn from(mode: RegistrationMode) -> Self {
        match mode {
            RegistrationMode::Open => Registration::Open,
            RegistrationMode::Invite => Registration::Invite,
            RegistrationMode::Closed => Registration::Closed,
        }
    }
}

/// Flags and environment variables for the account policy (`None`: not given).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AccountArgs {
    /// Who may create accounts: `open` (anyone, rate-limited; the default), `invite` (with a
    /// single-use code from a team owner) or `closed` (nobody; the first owner's setup still works).
    #[arg(long, env = "LACHESIS_REGISTRATION", value_enum)]
    pub registration: Option<RegistrationMode>,
    /// Accounts one client address may create per hour (an IPv6 address counts by its /64).
    /// Default 10.
    #[arg(long, env = "LACHESIS_REGISTRATIONS_PER_HOUR")]
    pub registrations_per_hour: Option<u32>,
    /// Password hashes computed at once (argon2id: 19 MiB and a core each); further sign-ins and
    /// sign-ups wait their turn. Default 2.
    #[arg(long, env = "LACHESIS_PASSWORD_HASH_CONCURRENCY")]
    pub password_hash_concurrency: Option<u32>,
    /// A browser session unused for this many hours ends. Default 168 (a week).
    #[arg(long, env = "LACHESIS_SESSION_IDLE_HOURS")]
    pub session_idle_hours: Option<u32>,
    /// A browser session ends this many days after sign-in, however much it is used. Default 14.
    #[arg(long, env = "LACHESIS_SESSION_DAYS")]
    pub session_days: Option<u32>,
    /// The longest lifetime, in days, a new API token may ask for (`expires_in_days`).
    /// Default 365.
    #[arg(long, env = "LACHESIS_TOKEN_MAX_DAYS")]
    pub token_max_days: Option<u32>,
    /// Days an invite code stays valid. Default 7.
    #[arg(long, env = "LACHESIS_INVITE_DAYS")]
    pub invite_days: Option<u32>,
    /// Teams one user may own at once (each team holds runs, cards and budgets). Default 10.
    #[arg(long, env = "LACHESIS_TEAMS_PER_USER")]
    pub teams_per_user: Option<u32>,
}

/// The account policy the auth routes enforce. Clones share the guards: one process, one count
/// of sign-ups and one argon2 gate.
#[derive(Debug, Clone)]
pub struct AccountPolicy {
    pub registration: Registration,
    pub session_idle: Duration,
    pub session_days: u32,
    pub token_max_days: u32,
    pub invite_days: u32,
    pub teams_per_user: u32,
    /// Sign-ups per client address within an hour.
    pub registrations: Arc<WindowLimiter>,
    /// Every argon2 hash and verification passes here.
    pub hashing: Arc<PasswordHashing>,
}

impl Default for AccountPolicy {
    fn default() -> Self {
        Self::resolve(&AccountArgs::default()).expect("the default policy is within every bound")
    }
}

impl AccountPolicy {
    pub fn resolve(args: &AccountArgs) -> anyhow::Result<Self> {
        let registrations_per_hour = at_least_one(
            "--registrations-per-hour (use --registration closed to stop sign-ups)",
            args.registrations_per_hour,
            DEFAULT_REGISTRATIONS_PER_HOUR,
            100_000,
        )?;
        let concurrency = at_least_one(
            "--password-hash-concurrency",
            args.password_hash_concurrency,
            DEFAULT_PASSWORD_HASH_CONCURRENCY,
            256,
        )?;
        let session_days = at_least_one(
            "--session-days",
            args.session_days,
            DEFAULT_SESSION_DAYS,
            365,
        )?;
        let session_idle_hours = at_least_one(
            "--session-idle-hours",
            args.session_idle_hours,
            DEFAULT_SESSION_IDLE_HOURS,
            24 * 365,
        )?;
        let token_max_days = at_least_one(
            "--token-max-days",
            args.token_max_days,
            DEFAULT_TOKEN_MAX_DAYS,
            3650,
        )?;
        let invite_days =
            at_least_one("--invite-days", args.invite_days, DEFAULT_INVITE_DAYS, 365)?;
        let teams_per_user = at_least_one(
            "--teams-per-user",
            args.teams_per_user,
            DEFAULT_TEAMS_PER_USER,
            10_000,
        )?;
        Ok(Self {
            registration: args
                .registration
                .map_or(Registration::Open, Registration::from),
            session_idle: Duration::from_secs(u64::from(session_idle_hours) * 3600),
            session_days,
            token_max_days,
            invite_days,
            teams_per_user,
            registrations: Arc::new(WindowLimiter::new(
                registrations_per_hour as usize,
                Duration::from_secs(3600),
                MAX_KEYS,
            )),
            hashing: Arc::new(PasswordHashing::new(concurrency as usize)),
        })
    }
}

/// `given` or `default`, refused outside `1..=most` (a zero would lock everyone out or never
/// expire anything, which other settings express better).
fn at_least_one(flag: &str, given: Option<u32>, default: u32, most: u32) -> anyhow::Result<u32> {
    let value = given.unwrap_or(default);
    if !(1..=most).contains(&value) {
        bail!("{flag} must be between 1 and {most}, not {value}");
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        accounts: AccountArgs,
    }

    fn policy(argv: &[&str]) -> anyhow::Result<AccountPolicy> {
        let cli = Cli::try_parse_from(std::iter::once("lachesis").chain(argv.iter().copied()))?;
        AccountPolicy::resolve(&cli.accounts)
    }

    #[test]
    fn defaults_are_open_registration_ten_an_hour_and_week_long_idle_sessions() {
        let policy = policy(&[]).unwrap();
        assert_eq!(policy.registration, Registration::Open);
        assert_eq!(policy.session_idle, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(
            (
                policy.session_days,
                policy.token_max_days,
                policy.invite_days
            ),
            (14, 365, 7)
        );
        assert_eq!(policy.teams_per_user, 10);
        for _ in 0..10 {
            assert!(policy.registrations.acquire("198.51.100.1").is_ok());
        }
        assert!(policy.registrations.acquire("198.51.100.1").is_err());
        assert_eq!(policy.hashing.runs(), 0);
    }

    #[test]
    fn every_limit_has_a_flag() {
        let policy = policy(&[
            "--registration",
            "invite",
            "--registrations-per-hour",
            "2",
            "--password-hash-concurrency",
            "1",
            "--session-idle-hours",
            "3",
            "--session-days",
            "2",
            "--token-max-days",
            "30",
            "--invite-days",
            "1",
            "--teams-per-user",
            "3",
        ])
        .unwrap();
        assert_eq!(policy.registration, Registration::Invite);
        assert_eq!(policy.session_idle, Duration::from_secs(3 * 3600));
        assert_eq!(
            (
                policy.session_days,
                policy.token_max_days,
                policy.invite_days
            ),
            (2, 30, 1)
        );
        assert_eq!(policy.teams_per_user, 3);
        assert!(policy.registrations.acquire("a").is_ok());
        assert!(policy.registrations.acquire("a").is_ok());
        assert!(policy.registrations.acquire("a").is_err());
    }

    #[test]
    fn zero_and_oversized_limits_are_refused() {
        assert!(policy(&["--registrations-per-hour", "0"]).is_err());
        assert!(policy(&["--password-hash-concurrency", "0"]).is_err());
        assert!(policy(&["--session-days", "10000"]).is_err());
        assert!(policy(&["--registration", "sometimes"]).is_err());
    }
}
