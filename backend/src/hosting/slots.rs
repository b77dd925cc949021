//! Counted slots per key, for what one client holds open: WebSockets per address (an IPv6 /64,
//! which one subscriber usually holds whole), model requests per caller. A key cannot hold more
//! than its share; a slot is given back when dropped.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The unit a per-address limit counts: the address itself, or its /64 for IPv6.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Slots per client address.
pub type AddressSlots = Slots<IpAddr>;

#[derive(Debug)]
pub struct Slots<K: Hash + Eq> {
    limit: usize,
    held: Arc<Mutex<HashMap<K, usize>>>,
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot<K: Hash + Eq = IpAddr> {
    key: K,
    held: Arc<Mutex<HashMap<K, usize>>>,
}

impl Slots<IpAddr> {
    /// A slot for `ip`'s address (its /64 for IPv6), or `Err(limit)` when it holds them all.
    pub fn claim(&self, ip: IpAddr) -> Result<Slot, usize> {
        self.claim_key(address_key(ip))
    }

    pub fn held_by(&self, ip: IpAddr) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(&address_key(ip)).copied().unwrap_or(0)
    }
}

impl<K: Hash + Eq + Clone> Slots<K> {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            held: Arc::default(),
        }
    }

    /// A slot for `key`, or `Err(limit)` when it holds them all. Keys holding nothing take no
    /// room, so the table is as large as what is open at once.
    pub fn claim_key(&self, key: K) -> Result<Slot<K>, usize> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(key.clone()).or_insert(0);
        if *count >= self.limit {
            return Err(self.limit);
        }
        *count += 1;
        Ok(Slot {
            key,
            held: self.held.clone(),
        })
    }
}

impl<K: Hash + Eq> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_its_limit_and_gets_slots_back() {
        let slots = AddressSlots::new(2);
        let a: IpAddr = "2001:db8:1:2::5".parse().unwrap();
        let same_net: IpAddr = "2001:db8:1:2::ffff".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::5".parse().unwrap();
        let first = slots.claim(a).unwrap();
        let _second = slots.claim(same_net).unwrap();
        assert_eq!(slots.claim(a).unwrap_err(), 2);
        assert!(slots.claim(other).is_ok());
        drop(first);
        let _third = slots.claim(same_net).unwrap();
        assert_eq!(slots.held_by(a), 2);
        assert!(slots.claim(a).is_err());
    }
}
