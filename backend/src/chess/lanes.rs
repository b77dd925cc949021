//! Reviews queue per game owner. A finished game's review costs about two Stockfish searches per
//! agent move, and the engine pool is shared by everyone: without a lane per owner, one account
//! ending many long games at once would put thousands of searches ahead of everyone else's
//! review. With lanes, an owner has at most `per_owner` reviews searching at a time and the rest
//! of its reviews wait behind them, while other owners' reviews go ahead.
//!
//! A game's review is queued once per server: the sweep that looks for unreviewed games finds
//! those still waiting in their lane too, and must not queue them again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Reviews one owner may have running at once when no flag says otherwise.
pub const DEFAULT_REVIEWS_PER_OWNER: usize = 1;

/// Whose lane a review runs in: the game's owning user or team (both `None` for games started
/// with accounts off or by the admin, which share one lane).
pub type Owner = (Option<i64>, Option<i64>);

#[derive(Debug)]
pub struct ReviewLanes {
    per_owner: usize,
    lanes: Mutex<HashMap<Owner, Arc<Semaphore>>>,
    /// Games whose review is queued or running on this server.
    queued: Arc<Mutex<HashSet<i64>>>,
    /// What this server's reviews write as their claims' holder (random per server): only the
    /// holder renews, releases or stores a claimed game.
    holder: i64,
    /// Set when the server stops: no review takes a claim after that, so none is left held by a
    /// server that is gone.
    closed: AtomicBool,
}

/// Game `id`'s review counted as queued on this server until this drops.
#[derive(Debug)]
pub struct Queued {
    id: i64,
    queued: Arc<Mutex<HashSet<i64>>>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        queued.remove(&self.id);
    }
}

impl Default for ReviewLanes {
    fn default() -> Self {
        Self::new(DEFAULT_REVIEWS_PER_OWNER)
    }
}

impl ReviewLanes {
    pub fn new(per_owner: usize) -> Self {
        Self {
            per_owner: per_owner.max(1),
            lanes: Mutex::default(),
            queued: Arc::default(),
            holder: rand::random(),
            closed: AtomicBool::new(false),
        }
    }

    /// No review of this server claims a game from now on (the server is stopping).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// This server's claim holder (see [`crate::chess::store::claim_review`]).
    pub fn holder(&self) -> i64 {
        self.holder
    }

    /// Counts game `id`'s review as queued on this server, or `None` when it already is.
    pub fn queue(&self, id: i64) -> Option<Queued> {
        let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        queued.insert(id).then(|| Queued {
            id,
            queued: self.queued.clone(),
        })
    }

    /// Waits for a place in `owner`'s lane; the review runs while the permit is held.
    pub async fn enter(&self, owner: Owner) -> OwnedSemaphorePermit {
        let lane = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            // A lane nobody holds or waits on is only its map entry: drop it, so the table holds
            // owners with reviews in flight and no more.
            lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
            lanes
                .entry(owner)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_owner)))
                .clone()
        };
        lane.acquire_owned()
            .await
            .expect("review lanes are never closed")
    }

    /// Owners with a review running or waiting (for tests and the status page).
    pub fn busy_owners(&self) -> usize {
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes
            .values()
            .filter(|lane| Arc::strong_count(lane) > 1)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `enter` completes within a short wait (a paused clock makes the wait exact).
    async fn enters(lanes: &ReviewLanes, owner: Owner) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(Duration::from_secs(1), lanes.enter(owner))
            .await
            .ok()
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_waits_behind_its_own_review_and_not_behind_others() {
        let lanes = ReviewLanes::new(1);
        let alice = (Some(1), None);
        let team = (None, Some(7));
        let first = enters(&lanes, alice).await.expect("an empty lane admits");
        // Alice's second review waits for her first...
        assert!(enters(&lanes, alice).await.is_none());
        // ...while a team's review goes ahead.
        let other = enters(&lanes, team)
            .await
            .expect("another owner is not queued");
        assert_eq!(lanes.busy_owners(), 2);
        drop(first);
        let second = enters(&lanes, alice).await.expect("the lane freed");
        drop((second, other));
        // Idle lanes are forgotten on the next entry.
        let _third = enters(&lanes, team).await.unwrap();
        assert_eq!(lanes.busy_owners(), 1);
        assert_eq!(lanes.lanes.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_game_is_queued_once_until_its_review_ends() {
        let lanes = ReviewLanes::new(1);
        let first = lanes.queue(5).expect("nothing queued yet");
        assert!(lanes.queue(5).is_none(), "already queued");
        let other = lanes.queue(6).expect("another game is queued on its own");
        drop(first);
        assert!(
            lanes.queue(5).is_some(),
            "queued again once its review ended"
        );
        drop(other);
        assert!(lanes.queued.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wider_lane_admits_that_many() {
        let lanes = ReviewLanes::new(2);
        let owner = (Some(3), None);
        let a = enters(&lanes, owner).await.unwrap();
        let b = enters(&lanes, owner).await.unwrap();
        assert!(enters(&lanes, owner).await.is_none());
        drop((a, b));
        // Zero is read as one: a lane always admits someone.
        let narrow = ReviewLanes::new(0);
        let _c = enters(&narrow, owner).await.unwrap();
        assert!(enters(&narrow, owner).await.is_none());
    }
}
