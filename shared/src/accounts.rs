//! Accounts, teams and API tokens: the bodies of `/api/auth/...`, `/api/me` and `/api/teams/...`.

use serde::{Deserialize, Serialize};

/// A member's rights in a team. Owners manage members and tokens; members write runs; viewers
/// only read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads the team's runs.
    Viewer,
    /// Reads and writes the team's runs.
    Member,
    /// Writes runs and manages members, tokens and invites.
    Owner,
}

impl Role {
    /// The snake_case name, as stored and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Member => "member",
            Role::Owner => "owner",
        }
    }

    /// The inverse of [`Role::as_str`]; `None` for an unknown name.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "member" => Some(Role::Member),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }

    /// Members and owners may change a run; viewers may not.
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
    /// The sign-in name; unique.
    pub username: String,
    /// Sent in clear in the body; the server stores only its hash.
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
    /// The account's sign-in name.
    pub username: String,
    /// Checked against the stored hash; a match sets the session cookie.
    pub password: String,
}

/// `GET /api/me` (and the answer to login and setup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Me {
    /// `None` when authentication is off and nobody is signed in.
    pub user: Option<UserInfo>,
    /// The teams the user belongs to, with their role in each; empty when nobody is signed in.
    pub teams: Vec<Membership>,
    /// Sent back as `X-CSRF-Token` on every cookie-authenticated mutation.
    pub csrf_token: Option<String>,
    /// Mirrors [`AuthState::enabled`]: when off the app shows no sign-in.
    pub auth_enabled: bool,
}

/// The signed-in user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    /// The user's database id.
    pub id: i64,
    /// The sign-in name.
    pub username: String,
}

/// One team the user belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Membership {
    /// The team's name, as in `/api/teams/{team}/...`.
    pub team: String,
    /// The user's rights in that team.
    pub role: Role,
}

/// `POST /api/teams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTeam {
    /// The new team's unique name; the caller becomes its owner.
    pub name: String,
}

/// `GET /api/teams/{team}/members` row, and `POST` body to add or change one (owners only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// An existing account's sign-in name.
    pub username: String,
    /// Its rights in the team.
    pub role: Role,
}

/// `POST /api/teams/{team}/tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// A label for people, shown in the token list.
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
    /// The token's database id, used to revoke it.
    pub id: i64,
    /// The label it was created with.
    pub name: String,
    /// The one run it is limited to; `None`: every run of the team.
    pub run: Option<String>,
    /// Cannot post groups or register.
    pub read_only: bool,
    /// May call the embedded model.
    #[serde(default)]
    pub inference: bool,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// When a request last authenticated with it, in milliseconds since the Unix epoch; `None`:
    /// never used.
    pub last_used_at_ms: Option<i64>,
    /// When the token stops working; `None`: when revoked.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
}

/// The answer to `POST /api/teams/{team}/tokens`: the secret, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedToken {
    /// The token as it will be listed.
    pub info: TokenInfo,
    /// The secret, sent as `Authorization: Bearer ...`; the server keeps only its hash.
    pub token: String,
}

/// The answer to `POST /api/teams/{team}/invites` (owners only): a single-use code for
/// `NewAccount::invite`, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedInvite {
    /// The code to hand to the person who registers.
    pub code: String,
    /// When the code stops working, in milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
}

/// `PUT /api/runs/{run}/visibility`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Visibility {
    /// Anyone, signed in or not, may read the run; only its team may still write it.
    pub public: bool,
}
