//! Counted slots per client address, for connections that stay open (WebSockets): one address
//! (an IPv6 /64, which one subscriber usually holds whole) cannot hold more than its share.

use std::collections::HashMap;
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

#[derive(Debug)]
pub struct AddressSlots {
    limit: usize,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    key: IpAddr,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl AddressSlots {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            held: Arc::default(),
        }
    }

    /// A slot for `ip`, or `Err(limit)` when its address holds them all.
    pub fn claim(&self, ip: IpAddr) -> Result<Slot, usize> {
        let key = address_key(ip);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(key).or_insert(0);
        if *count >= self.limit {
            return Err(self.limit);
        }
        *count += 1;
        Ok(Slot {
            key,
            held: self.held.clone(),
        })
    }

    pub fn held_by(&self, ip: IpAddr) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(&address_key(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
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
