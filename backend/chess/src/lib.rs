//! The DeepSacrifice agent: what the server, the self-play command and the LLM-player environment
//! share. Its only I/O is the Stockfish processes of [`stockfish`].
//!
//! - [`features`]: what a move does (material by static exchange, sacrifices, checks, attack on
//!   the king, lines opened toward it, mobility), as numbers the policy weighs.
//! - [`search`]: a material-and-position evaluation with a shallow alpha-beta and quiescence.
//! - [`verify`]: the sacrifices the shallow search likes, searched again deeper.
//! - [`agent`]: the policy, a softmax over weighted move features at a temperature.
//! - [`judge`]: the reward model, either the engine judge or an LLM's verdict (strict JSON).
//! - [`stockfish`] and [`oracle`]: Stockfish over UCI, and soundness and annotations judged by it.
//! - [`rating`] and [`rating_fit`]: the agent's Elo, from games against a ladder of fixed opponents
//!   anchored at Stockfish's `UCI_Elo` 1350, every rating fitted jointly.
//! - [`learn`]: policy-gradient updates of the weights from judged games.
//! - [`selfplay`]: games against a fixed baseline, learning as it goes; [`version_stats`]: how
//!   each version played, with 95% margins that count games, not moves, as samples;
//!   [`evaluation`]: version 0 and the final version measured side by side after learning.
//! - [`player`]: reading a move out of a language model's answer (SAN or UCI).

pub mod agent;
pub mod evaluation;
pub mod features;
pub mod judge;
pub mod learn;
pub mod oracle;
pub mod player;
pub mod rating;
pub mod rating_fit;
pub mod sacrifice_price;
pub mod search;
pub mod selfplay;
pub mod stockfish;
pub mod trust_region;
pub mod verify;
pub mod version_stats;

pub use lachesis_shared::chess::shakmaty;

use shakmaty::Role;

/// Centipawn values of the pieces (the king's is only used by static exchange, as "infinite").
pub fn piece_value(role: Role) -> i32 {
    match role {
        Role::Pawn => 100,
        Role::Knight => 300,
        Role::Bishop => 320,
        Role::Rook => 500,
        Role::Queen => 900,
        Role::King => 20_000,
    }
}
