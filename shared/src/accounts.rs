//! Accounts, teams and API tokens: the bodies of `/api/auth/...`, `/api/me` and `/api/teams/...`.

use serde::{Deserialize, Serialize};

/// A member's rights in a team. Owners manage members and tokens; members write runs; viewers
/// only read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Member,
    Owner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Member => "member",
            Role::Owner => "owner",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "member" => Some(Role::Member),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }

    pub fn can_write(self) -> bool {
        self >= Role::Member
    }
}

/// Who may create an account with `POST /api/auth/register` (the server's `--registration`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Anyone (rate-limited per client address).
    #[default]
    Open,
    /// Only with an invite code from a team owner; the new account joins that team.
    Invite,
    /// Nobody: owners add people who already have accounts. The first owner's setup still works.
    Closed,
}

/// `GET /api/auth/state`: what the sign-in page needs before anyone is signed in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthState {
    /// Off: every request acts with full rights (the loopback default).
    pub enabled: bool,
    /// No user exists yet: the first-run form creates the first owner.
    pub needs_first_owner: bool,
    /// Whether the sign-up form is offered, and whether it asks for an invite code.
    #[serde(default)]
    pub registration: Registration,
}

/// `POST /api/auth/setup` (only while no user exists) and `POST /api/auth/register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAccount {
    pub username: String,
    pub password: String,
    /// The team to create with the account as its owner (required by setup, optional otherwise).
    #[serde(default)]
    pub team: Option<String>,
    /// An invite code from a team owner (required when registration is by invite): the new
    /// account joins that team as a member. Setup ignores it.
    #[serde(default)]
    pub invite: Option<String>,
}

/// `POST /api/auth/login`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub username: String,
    pub password: String,
}

/// `GET /api/me` (and the answer to login and setup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Me {
    /// `None` when authentication is off and nobody is signed in.
    pub user: Option<UserInfo>,
    pub teams: Vec<Membership>,
    /// Sent back as `X-CSRF-Token` on every cookie-authenticated mutation.
    pub csrf_token: Option<String>,
    pub auth_enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    pub id: i64,
    pub username: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Membership {
    pub team: String,
    pub role: Role,
}

/// `POST /api/teams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTeam {
    pub name: String,
}

/// `GET /api/teams/{team}/members` row, and `POST` body to add or change one (owners only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub username: String,
    pub role: Role,
}

/// `POST /api/teams/{team}/tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    /// Limit the token to one run; it then also addresses that run on Atropos's legacy paths.
    #[serde(default)]
    pub run: Option<String>,
    /// Read-only tokens may not post groups or register.
    #[serde(default)]
    pub read_only: bool,
    /// The token stops working this many days after its creation (the server caps it); `None`:
    /// it works until revoked.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
    /// The token may also call the embedded model (`/v1/*`, `/generate`), which costs the server
    /// compute; without it those routes answer 403.
    #[serde(default)]
    pub inference: bool,
}

/// A token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub run: Option<String>,
    pub read_only: bool,
    /// May call the embedded model.
    #[serde(default)]
    pub inference: bool,
    pub created_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
    /// When the token stops working; `None`: when revoked.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
}

/// The answer to `POST /api/teams/{team}/tokens`: the secret, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedToken {
    pub info: TokenInfo,
    pub token: String,
}

/// The answer to `POST /api/teams/{team}/invites` (owners only): a single-use code for
/// `NewAccount::invite`, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedInvite {
    pub code: String,
    pub expires_at_ms: i64,
}

/// `PUT /api/runs/{run}/visibility`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Visibility {
    pub public: bool,
}
